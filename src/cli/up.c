/* SPDX-License-Identifier: MIT */
/* lazaret up (issue 22, up.h): what the foreground group (verb-up.c) and
 * the detached one (up-group.c) share: the checks before any agent starts,
 * starting an agent, printing its output inert, and the table at the end
 * with its reports (Markdown, HTML, JSON, SARIF). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "argv-util.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "host-git.h"
#include "launch.h"
#include "log.h"
#include "manifest.h"
#include "path-util.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "report.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "sandbox-backend.h"
#include "up.h"
#include "verbs.h"
#include "workspace-trust.h"

void up_print_inert(FILE *f, const char *tag, const char *text, size_t len) {
        bool line_start = true;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) text[i];
                if (tag && line_start)
                        fprintf(f, "%s | ", tag);
                line_start = false;
                if (tag && c == '\n') {
                        fputc('\n', f);
                        line_start = true;
                        continue;
                }
                if (c == 0xc2 && i + 1 < len && (unsigned char) text[i + 1] >= 0x80 &&
                    (unsigned char) text[i + 1] <= 0x9f) {
                        fprintf(f, "\\x%02x", (unsigned char) text[++i]);
                        continue;
                }
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        fprintf(f, "\\x%02x", c);
                else
                        fputc(c, f);
        }
        if (!line_start || !tag)
                fputc('\n', f);
}

/* Whole lines out, tagged; a line longer than the buffer goes out in
 * pieces; at EOF the rest. Returns false at EOF. */

int up_start_agent(const Globals *g, const char *self, UpAgent *r, int pty) {
        const ManifestAgent *a = r->agent;
        Argv v = {};
        argv_add(&v, "lazaret");
        if (g->config_path) {
                argv_add(&v, "--config");
                argv_add(&v, g->config_path);
        }
        argv_add(&v, "--workspace");
        argv_add(&v, a->workspace);
        argv_add(&v, "--agent");
        argv_add(&v, a->name);
        argv_add(&v, "run");
        argv_add(&v, "--tui=none");
        argv_add(&v, a->profile);
        argv_add(&v, "--");
        for (size_t i = 0; i < a->argc; i++)
                argv_add(&v, a->argv[i]);
        if (v.oom) {
                argv_done(&v);
                return -ENOMEM;
        }
        /* The workspace as checked (trusted by its canonical path), by
         * what it is: the agent's run refuses another directory put there
         * since (launch.h). A symbolic link there now is refused here. */
        char id[FD_IDENTITY_MAX], id_env[sizeof(WORKSPACE_ID_ENV "=") + FD_IDENTITY_MAX];
        int k0 = open_pinned_dir(a->workspace, NULL, NULL, id);
        if (k0 < 0) {
                log_error("agent %s: its workspace %s is no longer the directory lazaret up checked (%s): it was "
                          "replaced or moved; not started",
                          a->name, a->workspace, strerror(-k0));
                argv_done(&v);
                return -ESTALE; /* said */
        }
        snprintf(id_env, sizeof(id_env), WORKSPACE_ID_ENV "=%s", id);
        /* Our environment, and where to say that the session is open. */
        size_t n_env = 0;
        while (environ[n_env])
                n_env++;
        _cleanup_free_ char **envp = calloc(n_env + 3, sizeof(char *));
        if (!envp) {
                argv_done(&v);
                return -ENOMEM;
        }
        size_t k_env = 0;
        for (size_t i = 0; i < n_env; i++)
                if (!startswith(environ[i], READY_FD_ENV "=") && !startswith(environ[i], WORKSPACE_ID_ENV "="))
                        envp[k_env++] = environ[i];
        envp[k_env++] = (char *) READY_FD_ENV "=3";
        envp[k_env] = id_env;
        int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF }, ready[2] = { -EBADF, -EBADF };
        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || (pty < 0 && (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)) ||
            pipe2(ready, O_CLOEXEC) < 0) {
                int e = negative_errno();
                safe_close(out[0]);
                safe_close(out[1]);
                safe_close(err[0]);
                safe_close(err[1]);
                argv_done(&v);
                return e;
        }
        /* A group's agent has a terminal of its own (lazaret attach), the
         * controlling terminal of a session of its own. */
        SpawnFd fds[] = { { pty >= 0 ? pty : null, 0 },
                          { pty >= 0 ? pty : out[1], 1 },
                          { pty >= 0 ? pty : err[1], 2 },
                          { ready[1], 3 } };
        SpawnSpec sp = SPAWN_SPEC_INIT(self, v.v);
        sp.fds = fds;
        sp.n_fds = ELEMENTSOF(fds);
        sp.cwd = a->workspace;
        sp.envp = envp;
        sp.new_session = sp.controlling_tty = pty >= 0;
        /* Not waiting for each exec: the agents start side by side. */
        sp.no_wait = true;
        int k = spawn(&sp, &r->pid);
        argv_done(&v);
        safe_close(out[1]);
        safe_close(err[1]);
        safe_close(ready[1]);
        if (k < 0) {
                safe_close(out[0]);
                safe_close(err[0]);
                safe_close(ready[0]);
                return k;
        }
        r->out.fd = out[0];
        r->err.fd = err[0];
        r->ready_fd = ready[0];
        r->status = -1;
        r->started = now_usec();
        return 0;
}

static json_int_t sum_counts(json_t *list, const char *key, const char *want) {
        json_int_t n = 0;
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
                if (key && !streq_ptr(json_string_value(json_object_get(e, key)), want))
                        continue;
                n += json_integer_value(json_object_get(e, "count"));
        }
        return n;
}

/* What the agent's branch changed against HEAD (git diff --numstat
 * HEAD...lazaret/agent-NAME, the host's git run safely): false where there
 * is no such branch (a workspace outside git, or direct mode). */
static bool branch_numstat(const char *git, const ManifestAgent *a, const char *branch, json_int_t *files,
                           json_int_t *added, json_int_t *deleted) {
        if (!git)
                return false;
        Argv v = {};
        host_git_argv(&v, a->workspace);
        argv_add(&v, "diff");
        argv_add(&v, "--numstat");
        argv_add(&v, "--no-renames");
        argv_addf(&v, "HEAD...refs/heads/%s", branch);
        argv_add(&v, "--");
        if (v.oom) {
                argv_done(&v);
                return false;
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(git, (const char *const *) v.v, 30 * 1000000ULL, &res);
        argv_done(&v);
        if (r < 0 || res.status != 0 || !res.out)
                return false;
        *files = *added = *deleted = 0;
        for (const char *l = res.out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
                if (*l == '\n')
                        continue;
                (*files)++;
                /* "ADDED\tDELETED\tPATH"; a binary file's are "-". */
                *added += strtoll(l, NULL, 10);
                const char *tab = strchr(l, '\t');
                if (tab)
                        *deleted += strtoll(tab + 1, NULL, 10);
        }
        return true;
}

/* One agent's line of the combined report, from its own report (its event
 * record: what its sessions changed, its network decisions, the refusals)
 * and its exit. Each agent's figures are its own Domain's: nothing of two
 * boundaries is merged. */
/* The agent's own report (lazaret --agent NAME report --format FORMAT),
 * parsed, or NULL. */
static json_t *agent_report(const Globals *g, const char *self, const ManifestAgent *a, const char *format,
                            char **ret_why) {
        /* The agent's own profile, named: with several configured, a bare
         * report would take the default one, or fail (issue 42: the table
         * was all '?'). */
        const char *argv[] = { "lazaret", "--config", g->config_path, "--workspace", a->workspace, "--agent",
                               a->name,   "report",   a->profile,     "--format",    format,       NULL };
        if (!g->config_path)
                memmove(argv + 1, argv + 3, sizeof(argv) - 3 * sizeof(*argv));
        _cleanup_(exec_result_done) ExecResult res = {};
        json_t *rep = NULL;
        if (exec_capture(self, argv, 60 * 1000000ULL, &res) >= 0 && res.status == 0 && res.out)
                rep = json_loads(res.out, 0, NULL);
        if (!rep && ret_why) {
                /* Its last line, and the command that says it in full. */
                const char *err = res.err ? res.err : "";
                size_t n = strlen(err);
                while (n > 0 && err[n - 1] == '\n')
                        n--;
                const char *line = err + n;
                while (line > err && line[-1] != '\n')
                        line--;
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "unreadable: %.*s ('lazaret --workspace %s --agent %s report %s' says it)",
                              line < err + n ? (int) (err + n - line) : 12, line < err + n ? line : "no JSON came",
                              a->workspace, a->name, a->profile);
                *ret_why = strbuf_steal(&b);
        }
        return rep;
}

json_t *up_agent_summary(const Globals *g, const char *self, const char *git, const UpAgent *r) {
        const ManifestAgent *a = r->agent;
        char branch[64];
        snprintf(branch, sizeof(branch), "lazaret/agent-%s", a->name);
        /* branch: where branch mode put its work (a workspace outside git
         * has none). */
        json_t *s = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I}", "name", a->name, "profile", a->profile, "workspace",
                              a->workspace, "branch", branch, "exit", r->status, "duration_ms",
                              (json_int_t) ((r->ended - r->started) / 1000));
        if (!s)
                return NULL;
        /* A workspace outside git has no branch to name. */
        json_int_t bfiles = 0, badded = 0, bdeleted = 0;
        bool on_branch = branch_numstat(git, a, branch, &bfiles, &badded, &bdeleted);
        if (!on_branch)
                json_object_set_new(s, "branch", json_null());
        _cleanup_free_ char *why = NULL;
        json_t *rep = agent_report(g, self, a, "json", &why);
        if (!rep) {
                json_object_set_new(s, "record", json_string(why ?: "unreadable"));
                return s;
        }
        json_int_t files = 0, added = 0, deleted = 0, allowed = 0, refused = 0, refusals = 0;
        size_t i, k;
        json_t *sb, *ss;
        json_array_foreach(json_object_get(rep, "sandboxes"), i, sb) {
                json_array_foreach(json_object_get(sb, "sessions"), k, ss) {
                        json_t *f = json_object_get(ss, "files");
                        files += (json_int_t) json_array_size(json_object_get(f, "files"));
                        added += json_integer_value(json_object_get(f, "added"));
                        deleted += json_integer_value(json_object_get(f, "deleted"));
                }
                allowed += sum_counts(json_object_get(sb, "network"), "verdict", "allowed");
                refused += sum_counts(json_object_get(sb, "network"), "verdict", "refused");
                refusals += sum_counts(json_object_get(sb, "refusals"), NULL, NULL);
        }
        json_decref(rep);
        /* Branch mode: what its branch holds; otherwise what its sessions
         * changed in the workspace, by its record. */
        if (on_branch) {
                files = bfiles;
                added = badded;
                deleted = bdeleted;
        }
        json_object_update_new(s, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "changes_from",
                                            on_branch ? "branch" : "record", "files_changed", files, "lines_added",
                                            added, "lines_deleted", deleted, "network_allowed", allowed,
                                            "network_refused", refused, "refusals", refusals));
        return s;
}

/* The manifest's exact bytes must be trusted (manifest.h): it chooses
 * which directories and profiles the agents get, and an agent that can
 * write it would otherwise choose them for the next run. Returns 0, or an
 * exit status after saying why and what to do. */
int up_manifest_trusted(const Manifest *m, const char *home) {
        _cleanup_free_ char *store = NULL;
        if (!home) {
                log_error("cannot find the home directory (where trusted manifests are recorded): set $HOME");
                return EXIT_LAZARET;
        }
        if (wstrust_manifest_store_path(home, &store) < 0)
                return EXIT_LAZARET;
        _cleanup_(wstrust_records_done) WsTrustRecords recs = {};
        int r = trust_records_read(store, &recs);
        if (r != 0)
                return r;
        char digest[WSTRUST_SHA256_HEX_LEN + 1];
        if (manifest_trust_digest(m, digest) < 0)
                return EXIT_LAZARET;
        const WsTrustRecord *rec = wstrust_find(&recs, m->canonical);
        if (rec && streq(rec->sha256, digest))
                return 0;
        if (rec) {
                /* The bytes, or where a workspace resolves (a symbolic
                 * link an agent put in its place), are not what the person
                 * read: say where each agent would go now. */
                StrBuf b = STRBUF_INIT;
                for (size_t i = 0; i < m->n_agents; i++)
                        strbuf_printf(&b, "%s%s in %s", i ? ", " : "", m->agents[i].name, m->agents[i].workspace);
                _cleanup_free_ char *dirs = strbuf_steal(&b);
                _cleanup_free_ char *vis = dirs ? prompt_inert(dirs, strlen(dirs)) : NULL;
                log_error("%s changed since you trusted it (its bytes, or the directory an agent's workspace "
                          "resolves to: now %s), which voids that trust: check it and those directories, then run "
                          "'lazaret trust --manifest %s' again; nothing was started",
                          m->canonical, vis ?: "?", m->path);
        } else
                log_error("%s is not trusted: a manifest chooses each agent's workspace and profile, and an agent "
                          "that could write it would choose them for the next run. Read it, then run 'lazaret trust "
                          "--manifest %s'; nothing was started",
                          m->canonical, m->path);
        return EXIT_CONFIG;
}

char *up_summary_markdown(const char *manifest, json_t *agents) {
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *title = report_text(manifest, strlen(manifest), TEXT_MARKDOWN);
        strbuf_printf(&b, "# lazaret up: %s\n\n", title ?: "");
        strbuf_printf(&b, "| agent | profile | exit | duration | files changed | lines +/- | network allowed/refused "
                          "| refusals | branch |\n|---|---|---|---|---|---|---|---|---|\n");
        size_t i;
        json_t *a;
        json_array_foreach(agents, i, a) {
                if (json_object_get(a, "record"))
                        strbuf_printf(&b, "| %s | %s | %lld | %.1f s | ? | ? | ? | ? | `%s` |\n",
                                      json_string_value(json_object_get(a, "name")),
                                      json_string_value(json_object_get(a, "profile")),
                                      (long long) json_integer_value(json_object_get(a, "exit")),
                                      (double) json_integer_value(json_object_get(a, "duration_ms")) / 1000,
                                      json_string_value(json_object_get(a, "branch")) ?: "(no branch)");
                else
                        strbuf_printf(&b,
                                      "| %s | %s | %lld | %.1f s | %lld | +%lld -%lld | %lld/%lld | %lld | `%s` |\n",
                                      json_string_value(json_object_get(a, "name")),
                                      json_string_value(json_object_get(a, "profile")),
                                      (long long) json_integer_value(json_object_get(a, "exit")),
                                      (double) json_integer_value(json_object_get(a, "duration_ms")) / 1000,
                                      (long long) json_integer_value(json_object_get(a, "files_changed")),
                                      (long long) json_integer_value(json_object_get(a, "lines_added")),
                                      (long long) json_integer_value(json_object_get(a, "lines_deleted")),
                                      (long long) json_integer_value(json_object_get(a, "network_allowed")),
                                      (long long) json_integer_value(json_object_get(a, "network_refused")),
                                      (long long) json_integer_value(json_object_get(a, "refusals")),
                                      json_string_value(json_object_get(a, "branch")) ?: "(no branch)");
        }
        strbuf_printf(&b, "\nEach agent ran in a boundary of its own; `lazaret --agent NAME report` has its "
                          "details.\n");
        return strbuf_steal(&b);
}

/* The same table for a terminal: plain columns, aligned, no Markdown. */
char *up_summary_text(const char *manifest, json_t *agents) {
        enum { COLS = 9 };
        static const char *const head[COLS] = { "agent",     "profile",     "exit",     "duration", "files",
                                                "lines +/-", "network +/-", "refusals", "branch" };
        size_t n = json_array_size(agents), w[COLS];
        char *(*cell)[COLS] = calloc(n + 1, sizeof *cell);
        if (!cell)
                return NULL;
        for (size_t c = 0; c < COLS; c++)
                cell[0][c] = strdup(head[c]);
        size_t i;
        json_t *a;
        json_array_foreach(agents, i, a) {
                char **r = cell[i + 1];
                bool known = !json_object_get(a, "record");
                StrBuf b;
#define CELL(k, ...)                                                                                                   \
        do {                                                                                                           \
                b = (StrBuf) STRBUF_INIT;                                                                              \
                strbuf_printf(&b, __VA_ARGS__);                                                                        \
                r[k] = strbuf_steal(&b);                                                                               \
        } while (0)
                CELL(0, "%s", json_string_value(json_object_get(a, "name")) ?: "?");
                CELL(1, "%s", json_string_value(json_object_get(a, "profile")) ?: "?");
                CELL(2, "%lld", (long long) json_integer_value(json_object_get(a, "exit")));
                CELL(3, "%.1f s", (double) json_integer_value(json_object_get(a, "duration_ms")) / 1000);
                if (known) {
                        CELL(4, "%lld", (long long) json_integer_value(json_object_get(a, "files_changed")));
                        CELL(5, "+%lld -%lld", (long long) json_integer_value(json_object_get(a, "lines_added")),
                             (long long) json_integer_value(json_object_get(a, "lines_deleted")));
                        CELL(6, "%lld/%lld", (long long) json_integer_value(json_object_get(a, "network_allowed")),
                             (long long) json_integer_value(json_object_get(a, "network_refused")));
                        CELL(7, "%lld", (long long) json_integer_value(json_object_get(a, "refusals")));
                } else
                        for (size_t c = 4; c < 8; c++)
                                CELL(c, "?");
                CELL(8, "%s", json_string_value(json_object_get(a, "branch")) ?: "(no branch)");
#undef CELL
        }
        for (size_t c = 0; c < COLS; c++) {
                w[c] = 0;
                for (size_t r = 0; r <= n; r++)
                        if (cell[r][c] && strlen(cell[r][c]) > w[c])
                                w[c] = strlen(cell[r][c]);
        }
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *title = prompt_inert(manifest, strlen(manifest));
        strbuf_printf(&b, "lazaret up: %s\n\n", title ?: "");
        for (size_t r = 0; r <= n; r++) {
                for (size_t c = 0; c < COLS; c++)
                        strbuf_printf(&b, "%s%-*s", c ? "  " : "", c + 1 < COLS ? (int) w[c] : 0, cell[r][c] ?: "?");
                strbuf_printf(&b, "\n");
        }
        json_array_foreach(agents, i, a) {
                const char *why = json_string_value(json_object_get(a, "record"));
                if (why) {
                        _cleanup_free_ char *vis = prompt_inert(why, strlen(why));
                        strbuf_printf(&b, "%s: record %s\n", json_string_value(json_object_get(a, "name")) ?: "?",
                                      vis ?: "?");
                }
        }
        strbuf_printf(&b, "\nEach agent ran in a boundary of its own; 'lazaret --agent NAME report PROFILE' has its "
                          "details.\n");
        for (size_t r = 0; r <= n; r++)
                for (size_t c = 0; c < COLS; c++)
                        free(cell[r][c]);
        free(cell);
        return strbuf_steal(&b);
}

/* Everything checked before anything starts: the manifest's trust, then
 * each agent as its launch would check it. Returns 0, or an exit status
 * after saying why. */
int up_check(const Globals *g, const char *home, const Manifest *m) {
        int r = up_manifest_trusted(m, home);
        if (r != 0)
                return r;
        for (size_t i = 0; i < m->n_agents; i++) {
                const ManifestAgent *a = &m->agents[i];
                Globals ag = { .config_path = g->config_path, .workspace = a->workspace, .agent = a->name };
                _cleanup_(config_freep) Config *cfg = NULL;
                const ConfigProfile *p = NULL;
                r = profile_load_for_launch(&ag, a->profile, _BACKEND_INVALID, &cfg, &p);
                if (r < 0) {
                        log_error("agent %s (%s:%u:%u) cannot start: nothing was started", a->name, m->path,
                                  a->pos.line, a->pos.col);
                        return profile_load_exit(r);
                }
                _cleanup_(launch_spec_done) LaunchSpec spec = {};
                _cleanup_free_ char *why = NULL;
                r = launch_spec_build(cfg, p, _BACKEND_INVALID, sandbox_backend_for(p->backend)->preflight, &spec,
                                      &why);
                if (r < 0) {
                        log_error("agent %s (%s:%u:%u) cannot start: %s; nothing was started", a->name, m->path,
                                  a->pos.line, a->pos.col, why ? why : strerror(-r));
                        return EXIT_LAZARET;
                }
                /* gVisor's image must be in the user's store already (the
                 * coordinator would find it missing only at the start). */
                if (spec.backend == BACKEND_GVISOR && spec.podman) {
                        _cleanup_(exec_result_done) ExecResult res = {};
                        r = exec_capture(spec.podman,
                                         (const char *const[]){ "podman", "image", "exists", spec.image, NULL },
                                         60 * 1000000ULL, &res);
                        if (r < 0 || res.status != 0) {
                                log_error("agent %s (%s:%u:%u) cannot start: the image %s is not in Podman's store "
                                          "(lazaret image build, or podman pull); nothing was started",
                                          a->name, m->path, a->pos.line, a->pos.col, spec.image);
                                return EXIT_LAZARET;
                        }
                }
        }
        return 0;
}

int up_self(char *buf, size_t size) {
        ssize_t sl = readlink("/proc/self/exe", buf, size - 1);
        if (sl <= 0) {
                log_error("cannot find this program: %s", sl < 0 ? strerror(errno) : "empty");
                return -EIO;
        }
        buf[sl] = '\0';
        return 0;
}

static char *summary_html(const char *manifest, json_t *agents) {
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *title = report_text(manifest, strlen(manifest), TEXT_HTML);
        strbuf_printf(&b,
                      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>lazaret up: %s</title></head>\n"
                      "<body>\n<h1>lazaret up: %s</h1>\n<table>\n<tr><th>agent</th><th>profile</th><th>exit</th>"
                      "<th>duration</th><th>files changed</th><th>lines +/-</th><th>network allowed/refused</th>"
                      "<th>refusals</th><th>branch</th></tr>\n",
                      title ?: "", title ?: "");
        size_t i;
        json_t *a;
        json_array_foreach(agents, i, a) {
                /* Names and profiles are of a-z, 0-9, '_' and '-' only. */
                strbuf_printf(&b, "<tr><td>%s</td><td>%s</td><td>%lld</td><td>%.1f s</td>",
                              json_string_value(json_object_get(a, "name")),
                              json_string_value(json_object_get(a, "profile")),
                              (long long) json_integer_value(json_object_get(a, "exit")),
                              (double) json_integer_value(json_object_get(a, "duration_ms")) / 1000);
                if (json_object_get(a, "record"))
                        strbuf_puts(&b, "<td>?</td><td>?</td><td>?</td><td>?</td>");
                else
                        strbuf_printf(&b, "<td>%lld</td><td>+%lld -%lld</td><td>%lld/%lld</td><td>%lld</td>",
                                      (long long) json_integer_value(json_object_get(a, "files_changed")),
                                      (long long) json_integer_value(json_object_get(a, "lines_added")),
                                      (long long) json_integer_value(json_object_get(a, "lines_deleted")),
                                      (long long) json_integer_value(json_object_get(a, "network_allowed")),
                                      (long long) json_integer_value(json_object_get(a, "network_refused")),
                                      (long long) json_integer_value(json_object_get(a, "refusals")));
                strbuf_printf(&b, "<td><code>%s</code></td></tr>\n",
                              json_string_value(json_object_get(a, "branch")) ?: "(no branch)");
        }
        strbuf_puts(&b, "</table>\n<p>Each agent ran in a boundary of its own; <code>lazaret --agent NAME "
                        "report</code> has its details.</p>\n</body></html>\n");
        return strbuf_steal(&b);
}

/* SARIF 2.1.0: one run per agent, each its own report's (properties.agent
 * names it): two boundaries are never one run. */
static char *combined_sarif(const Globals *g, const char *self, const UpAgent *run, size_t n) {
        json_t *runs = json_array();
        for (size_t k = 0; runs && k < n; k++) {
                json_t *one = agent_report(g, self, run[k].agent, "sarif", NULL);
                size_t i;
                json_t *r;
                json_array_foreach(json_object_get(one, "runs"), i, r) {
                        json_t *props = json_object_get(r, "properties");
                        if (json_is_object(props))
                                json_object_set_new(props, "agent", json_string(run[k].agent->name));
                        json_array_append(runs, r);
                }
                json_decref(one);
        }
        json_t *log =
                json_pack("{s:s, s:s, s:o}", "$schema",
                          "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
                          "version", "2.1.0", "runs", runs);
        char *out = log ? json_dumps(log, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(log);
        return out;
}

const char *const up_report_names[5] = { "up-report.md", "up-report.html", "up-report.json", "up-report.jsonl",
                                         "up-report.sarif" };

/* --report DIR: the comparison as up-report.md, .html, .json, .jsonl (one
 * agent a line) and .sarif, each a new file (0600) written through
 * report-output's walk (no symbolic link followed, nothing replaced), as
 * lazaret report --output writes. All of them or none: a failure takes
 * away the ones this call wrote, and says why once. */
static int write_reports(const Globals *g, const char *self, const Manifest *m, const UpAgent *run, size_t n,
                         const char *dir, const char *md, json_t *agents) {
        json_t *doc = json_pack("{s:i, s:s, s:O}", "lazaret_up_report", 1, "manifest", m->path, "agents", agents);
        _cleanup_free_ char *js = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(doc);
        StrBuf jl = STRBUF_INIT;
        size_t i;
        json_t *a;
        json_array_foreach(agents, i, a) {
                _cleanup_free_ char *line = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
                if (line)
                        strbuf_printf(&jl, "%s\n", line);
                else
                        jl.oom = true;
        }
        _cleanup_free_ char *jsonl = strbuf_steal(&jl), *html = summary_html(m->path, agents),
                            *sarif = combined_sarif(g, self, run, n);
        const char *data[ELEMENTSOF(up_report_names)] = { md, html, js, jsonl, sarif };
        _cleanup_free_ char *why = NULL;
        size_t lens[ELEMENTSOF(up_report_names)];
        int r = 0;
        for (size_t f = 0; f < ELEMENTSOF(up_report_names); f++)
                if (data[f])
                        lens[f] = strlen(data[f]);
                else
                        r = -ENOMEM;
        ReportDir rd = { .fd = -EBADF, .parent_fd = -EBADF };
        if (r >= 0)
                r = report_output_dir(dir, &rd, &why);
        if (r >= 0)
                r = report_output_write_all(rd.fd, up_report_names, data, lens, ELEMENTSOF(up_report_names), false,
                                            &why);
        report_output_done(&rd, r >= 0);
        if (r < 0)
                log_error("--report %s: %s; no report written", dir, why ?: strerror(-r));
        return r;
}

char *up_compare(const Globals *g, const char *self, const Manifest *m, const UpAgent *run, size_t n,
                 const char *report_dir, int *ret, char **ret_text) {
        _cleanup_free_ char *git = NULL;
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "git", &git) < 0 ||
            host_git_drop_environment() < 0)
                git = mfree(git);
        json_t *agents = json_array();
        for (size_t k = 0; agents && k < n; k++)
                json_array_append_new(agents, up_agent_summary(g, self, git, &run[k]));
        char *md = agents ? up_summary_markdown(m->path, agents) : NULL;
        if (ret_text)
                *ret_text = agents ? up_summary_text(m->path, agents) : NULL;
        if (report_dir && md && write_reports(g, self, m, run, n, report_dir, md, agents) < 0)
                *ret = EXIT_LAZARET;
        json_decref(agents);
        return md;
}
