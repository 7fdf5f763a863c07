/* SPDX-License-Identifier: MIT */
/* lazaret report [PROFILE] [--session ID] [--format FORMAT] [--output DIR]:
 * what the event record says, per sandbox run and session, as a document
 * to read or attach (report.h). Written to standard output, or as one new
 * file in DIR by the safe writer. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "event-record.h"
#include "fd-util.h"
#include "log.h"
#include "profile-pick.h"
#include "report.h"
#include "string-util.h"
#include "verbs.h"

static bool session_id_valid(const char *s) {
        if (!*s || strlen(s) > 36)
                return false;
        for (const char *p = s; *p; p++)
                if (!strchr("0123456789abcdef-", *p))
                        return false;
        return true;
}

int verb_report(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "format", required_argument, NULL, 'f' },
                { "output", required_argument, NULL, 'o' },
                { "session", required_argument, NULL, 'S' },
                {},
        };
        ReportFormat format = REPORT_MD;
        const char *output = NULL, *session = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hf:o:", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret report [PROFILE] [--session ID] [--format FORMAT] [--output DIR]\n"
                               "                      [--workspace DIR]\n\n"
                               "Report what the event record of PROFILE's sandbox says: per sandbox run and\n"
                               "session, the command and who ran it, the escalations and their decisions, the\n"
                               "files changed, the network destinations allowed and refused, and the git and\n"
                               "file operations refused.\n"
                               "  --session ID       one session (its id, or the first characters of it)\n"
                               "  -f, --format FORMAT  md (the default), html, json, jsonl or sarif (SARIF 2.1.0)\n"
                               "  -o, --output DIR   write lazaret-report-PROFILE[-ID].EXT, a new file, in DIR\n"
                               "                     (-2, -3... before .EXT when a report has that name)\n"
                               "                     (made when missing) instead of to standard output\n");
                        return 0;
                case 'f':
                        format = report_format_from_string(optarg);
                        if (format < 0) {
                                log_error("--format %s: no such format; give md, html, json, jsonl or sarif", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'o':
                        output = optarg;
                        break;
                case 'S':
                        session = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (session && !session_id_valid(session)) {
                log_error("--session %s: not a session id; give one (or its first characters) as lazaret events "
                          "shows it",
                          session);
                return EXIT_USAGE;
        }
        const char *name = NULL;
        if (profile_operand(argc, argv, optind, "report", &name) < 0)
                return EXIT_USAGE;
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int pr = profile_load(g, name, &cfg, &p);
        if (pr < 0)
                return profile_load_exit(pr);

        EventReader *rd = NULL;
        int r = event_reader_open(p->domain_dir, &rd);
        if (r < 0 && r != -ENOENT) {
                log_error("cannot read the event record in %s/%s: %s", p->domain_dir, EVENT_DIR, strerror(-r));
                return EXIT_LAZARET;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ReportMeta meta = {
                .profile = p->name,
                .workspace = cfg->workspace,
                .session = session,
                .now_usec = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000,
        };
        /* No record yet (rd NULL): an empty report says so. */
        json_t *model = NULL;
        r = report_build(rd, &meta, &model);
        event_reader_close(rd);
        if (r < 0) {
                log_error("cannot read the event record in %s/%s: %s", p->domain_dir, EVENT_DIR, strerror(-r));
                return EXIT_LAZARET;
        }
        StrBuf out = STRBUF_INIT;
        report_render(model, format, &out);
        json_decref(model);
        _cleanup_free_ char *doc = strbuf_steal(&out);
        if (!doc) {
                log_error("out of memory writing the report");
                return EXIT_LAZARET;
        }
        size_t len = strlen(doc);
        if (!output) {
                r = loop_write(STDOUT_FILENO, doc, len);
                if (r < 0) {
                        log_error("cannot write the report: %s", strerror(-r));
                        return EXIT_LAZARET;
                }
                return 0;
        }
        _cleanup_free_ char *file = NULL, *why = NULL;
        if (asprintf(&file, "lazaret-report-%s%s%s.%s", p->name, session ? "-" : "", session ?: "",
                     report_format_extension(format)) < 0) {
                log_error("out of memory writing the report");
                return EXIT_LAZARET;
        }
        /* Only once the report is ready: nothing is made for a report that
         * could not be, and a directory made for one that could not be
         * written is taken away again. */
        ReportDir dir;
        if (report_output_dir(output, &dir, &why) < 0) {
                log_error("--output %s", why ?: "cannot be opened");
                return EXIT_LAZARET;
        }
        /* A report already there under that name gets a new name beside
         * it, -2, -3...: never written over (issue 42: the second report
         * into one directory failed). Anything else there (a link, a FIFO:
         * planted) is refused, as report_output_write says. */
        r = report_output_write(dir.fd, file, doc, len, &why);
        for (unsigned k = 2; r == -EEXIST && k <= 999; k++) {
                struct stat st;
                if (fstatat(dir.fd, file, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        break;
                free(file);
                file = NULL;
                why = mfree(why);
                if (asprintf(&file, "lazaret-report-%s%s%s-%u.%s", p->name, session ? "-" : "", session ?: "", k,
                             report_format_extension(format)) < 0) {
                        report_output_done(&dir, false);
                        log_error("out of memory writing the report");
                        return EXIT_LAZARET;
                }
                r = report_output_write(dir.fd, file, doc, len, &why);
        }
        report_output_done(&dir, r >= 0);
        if (r < 0) {
                log_error("--output %s: %s", output, why ?: "cannot write the report");
                return EXIT_LAZARET;
        }
        printf("%s/%s\n", output, file);
        return 0;
}
