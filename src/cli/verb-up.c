/* SPDX-License-Identifier: MIT */
/* lazaret up MANIFEST (issue 22): several agents at once. Every agent of
 * the manifest is checked as its launch would check it (configuration,
 * profile, launch spec: the backend's preflight) before any starts; then
 * each runs as `lazaret --agent NAME --workspace DIR run PROFILE -- ARGV`,
 * a child of this process: a Domain, a sandbox and a branch of its own.
 * Their output is one stream, each line tagged with the agent's name; at
 * the end, each agent's exit and duration. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "launch.h"
#include "log.h"
#include "manifest.h"
#include "path-util.h"
#include "report.h"
#include "strbuf.h"
#include "string-util.h"
#include "up.h"
#include "verbs.h"
#include "workspace-trust.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) {
        stop_signal = sig;
}

/* One line of an agent's output, tagged. What the sandbox printed is
 * shown inert: control characters (C0 but tab, DEL, and C1, also as
 * UTF-8) as \xHH, so that no escape sequence of the agent's reaches the
 * person's terminal (its clipboard, its title, its keys). */
static void emit(const UpAgent *r, FILE *f, bool colour, size_t index, const char *line, size_t len) {
        static const int colours[] = { 36, 33, 35, 32, 34, 31 };
        if (colour)
                fprintf(f, "\033[%dm%s\033[0m | ", colours[index % ELEMENTSOF(colours)], r->agent->name);
        else
                fprintf(f, "%s | ", r->agent->name);
        up_print_inert(f, NULL, line, len);
}

static bool pump(UpAgent *r, UpStream *s, FILE *f, bool colour, size_t index) {
        ssize_t k = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                return true;
        if (k > 0)
                s->len += (size_t) k;
        char *start = s->buf, *nl;
        while ((nl = memchr(start, '\n', s->len - (size_t) (start - s->buf)))) {
                emit(r, f, colour, index, start, (size_t) (nl - start));
                start = nl + 1;
        }
        size_t rest = s->len - (size_t) (start - s->buf);
        memmove(s->buf, start, rest);
        s->len = rest;
        if (k <= 0 || s->len == sizeof(s->buf)) {
                if (s->len > 0)
                        emit(r, f, colour, index, s->buf, s->len);
                s->len = 0;
        }
        if (k <= 0) {
                s->fd = safe_close(s->fd);
                return false;
        }
        return true;
}

/* Whole lines of --help. */
static const char help[] = "Usage: lazaret up [--report DIR] [--detach | --attach NAME] MANIFEST\n\n"
                           "Run every agent of MANIFEST at once, each in a Domain, sandbox and branch\n"
                           "(lazaret/agent-NAME) of its own; all are checked before any starts (the\n"
                           "manifest's bytes trusted first: lazaret trust --manifest MANIFEST). Their\n"
                           "output is one stream of lines tagged with the agent's name; at the end a table\n"
                           "compares them (--report DIR also writes it as up-report.md and up-report.json).\n"
                           "Exit 0 when every agent's command exited 0, else 1.\n\n"
                           "--detach starts the group in the background, each agent on a terminal of its\n"
                           "own: lazaret attach NAME shows one (Ctrl-\\ detaches), lazaret down MANIFEST\n"
                           "ends them all and prints the table. --attach NAME is --detach, then attach.\n"
                           "See lazaret(1).\n";

int verb_up(int argc, char **argv, const Globals *g) {
        uint64_t up_started = now_usec(); /* the checks count as starting */
        const char *report_dir = NULL, *attach = NULL, *path = NULL;
        bool detach = false;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        fputs(help, stdout);
                        return 0;
                } else if (streq(argv[i], "--report") && i + 1 < argc)
                        report_dir = argv[++i];
                else if (streq(argv[i], "--attach") && i + 1 < argc)
                        attach = argv[++i];
                else if (streq(argv[i], "--detach"))
                        detach = true;
                else if (argv[i][0] == '-' || path) {
                        path = NULL;
                        break;
                } else
                        path = argv[i];
        }
        if (!path) {
                log_error("usage: lazaret up [--report DIR] [--detach | --attach NAME] MANIFEST (see lazaret up "
                          "--help)");
                return EXIT_USAGE;
        }
        if (detach && attach) {
                log_error("up: --detach and --attach go one at a time (--attach already detaches the group)");
                return EXIT_USAGE;
        }
        if (report_dir) {
                /* Checked before any agent starts, by the walk that will
                 * write it (a directory it makes is taken away again). */
                _cleanup_free_ char *why = NULL;
                ReportDir rd;
                int k = report_output_dir(report_dir, &rd, &why);
                struct stat st;
                for (size_t f = 0; k >= 0 && f < ELEMENTSOF(up_report_names); f++)
                        if (fstatat(rd.fd, up_report_names[f], &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                                log_error("--report %s: %s is already there: a report is only ever written as a "
                                          "new file; remove it or name another directory",
                                          report_dir, up_report_names[f]);
                                k = -EEXIST;
                        }
                report_output_done(&rd, false);
                if (k == -EEXIST)
                        return EXIT_USAGE;
                if (k < 0) {
                        log_error("--report %s", why ?: strerror(-k));
                        return EXIT_USAGE;
                }
                if (access(report_dir, W_OK) < 0) {
                        log_error("--report %s: not a directory you may write: %s", report_dir, strerror(errno));
                        return EXIT_USAGE;
                }
        }
        if (g->agent || g->workspace) {
                log_error("lazaret up takes no %s: the manifest names each agent and its workspace",
                          g->agent ? "--agent" : "--workspace");
                return EXIT_USAGE;
        }
        _cleanup_free_ char *home = NULL;
        (void) config_home(&home);
        Manifest m = {};
        _cleanup_free_ char *err = NULL, *abs_report = NULL;
        int r = manifest_load(path, home, &m, &err);
        if (r < 0) {
                log_error("%s", err ? err : strerror(-r));
                return r == -EINVAL ? EXIT_CONFIG : EXIT_LAZARET;
        }
        if (attach) {
                bool known = false;
                for (size_t i = 0; i < m.n_agents; i++)
                        known = known || streq(m.agents[i].name, attach);
                if (!known) {
                        log_error("--attach %s: %s has no such agent", attach, m.path);
                        manifest_done(&m);
                        return EXIT_USAGE;
                }
        }
        r = up_check(g, home, &m);
        char self[4096];
        if (r == 0 && up_self(self, sizeof(self)) < 0)
                r = EXIT_LAZARET;
        /* A group outlives this directory's name: its report goes where
         * --report meant when it was given (made absolute, never resolved:
         * the walk that writes it follows no symbolic link). */
        if (r == 0 && report_dir) {
                char cwd[4096];
                abs_report = path_is_absolute(report_dir) ? strdup(report_dir)
                             : getcwd(cwd, sizeof(cwd))   ? path_join(cwd, report_dir)
                                                          : NULL;
                if (!abs_report)
                        r = EXIT_LAZARET;
        }
        if (r != 0) {
                manifest_done(&m);
                return r;
        }
        if (detach || attach) {
                r = up_group(g, self, &m, abs_report, attach, up_started);
                manifest_done(&m);
                return r;
        }

        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        UpAgent *run = calloc(m.n_agents, sizeof(UpAgent));
        if (!run) {
                manifest_done(&m);
                return EXIT_LAZARET;
        }
        size_t started = 0, n_ready = 0;
        int ret = 0;
        const char *failed = NULL; /* the agent whose start failed: the group is ended */
        for (size_t i = 0; i < m.n_agents; i++) {
                run[i].agent = &m.agents[i];
                run[i].out.fd = run[i].err.fd = run[i].ready_fd = -EBADF;
                r = up_start_agent(g, self, &run[i], -EBADF);
                if (r < 0) {
                        if (r != -ESTALE) /* up_start_agent said why */
                                log_error("cannot start agent %s: %s", m.agents[i].name, strerror(-r));
                        failed = m.agents[i].name;
                        break;
                }
                started++;
        }
        bool colour = isatty(STDOUT_FILENO);
        size_t left = started;
        bool forwarded = false;
        while (left > 0) {
                if ((stop_signal || failed) && !forwarded) {
                        for (size_t k = 0; k < started; k++)
                                if (run[k].status < 0)
                                        (void) kill(run[k].pid, SIGTERM);
                        forwarded = true;
                }
                struct pollfd pf[3 * MANIFEST_AGENTS_MAX];
                size_t np = 0;
                for (size_t k = 0; k < started; k++) {
                        pf[np++] = (struct pollfd){ .fd = run[k].out.fd, .events = POLLIN };
                        pf[np++] = (struct pollfd){ .fd = run[k].err.fd, .events = POLLIN };
                        pf[np++] = (struct pollfd){ .fd = run[k].ready_fd, .events = POLLIN };
                }
                int n = poll(pf, np, 200);
                if (n < 0 && errno != EINTR)
                        break;
                for (size_t k = 0; n > 0 && k < started; k++) {
                        if (pf[3 * k].revents)
                                (void) pump(&run[k], &run[k].out, stdout, colour, k);
                        if (pf[3 * k + 1].revents)
                                (void) pump(&run[k], &run[k].err, stdout, colour, k);
                        if (pf[3 * k + 2].revents) {
                                char c;
                                ssize_t got = read(run[k].ready_fd, &c, 1);
                                if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                        continue;
                                run[k].ready = got == 1;
                                run[k].ready_fd = safe_close(run[k].ready_fd);
                                /* The figure the issue asks for: how long
                                 * the whole group took to start. */
                                if (run[k].ready && ++n_ready == m.n_agents)
                                        fprintf(stderr, "lazaret: %s%zu agent%s started in %.0f ms\n",
                                                m.n_agents > 1 ? "all " : "", m.n_agents, m.n_agents > 1 ? "s" : "",
                                                (double) (now_usec() - up_started) / 1000);
                                /* No partial group: one that could not start
                                 * ends the others. */
                                if (!run[k].ready && !failed && !stop_signal)
                                        failed = run[k].agent->name;
                        }
                }
                fflush(stdout);
                for (size_t k = 0; k < started; k++) {
                        int st;
                        if (run[k].status >= 0 || run[k].out.fd >= 0 || run[k].err.fd >= 0 ||
                            waitpid(run[k].pid, &st, WNOHANG) != run[k].pid)
                                continue;
                        run[k].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                        run[k].ended = now_usec();
                        left--;
                }
        }
        if (failed) {
                log_error("agent %s did not start (its lines above say why): the other agents were ended", failed);
                ret = EXIT_LAZARET;
        }
        printf("\n");
        for (size_t k = 0; k < started; k++)
                if (run[k].status != 0 && ret == 0)
                        ret = 1;
        /* Side by side, once all have ended (not after a failed start:
         * that group never ran). */
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ char *md = failed ? NULL : up_compare(g, self, &m, run, started, report_dir, &ret, &text);
        /* Markdown where it goes on to a file or a program; columns on a
         * terminal (issue 42: the terminal showed the raw Markdown). */
        if (md)
                fputs(text && isatty(STDOUT_FILENO) ? text : md, stdout);
        else
                for (size_t k = 0; k < started; k++)
                        printf("%-16s exit %d after %.1f s\n", run[k].agent->name, run[k].status,
                               (double) (run[k].ended - run[k].started) / 1e6);
        if (report_dir && md && ret != EXIT_LAZARET)
                printf("\nThe report: %s/up-report.{md,html,json,jsonl,sarif}\n", report_dir);
        free(run);
        manifest_done(&m);
        return ret;
}
