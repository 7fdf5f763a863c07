/* SPDX-License-Identifier: MIT */
/* lazaret events [PROFILE] [--follow] [--since TIME] [--session ID]
 *                [--source NAME] [--json]: the Domain's event record
 * (issue 19), oldest first, read from <domain>/events (event-record.h)
 * while the sandbox runs or after. Every string in it may come from the
 * agent: the text form shows it as the escalation prompt does (nothing
 * can move the cursor, hide itself or reorder what follows), --json prints
 * pure ASCII JSON. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event-record.h"
#include "exec-util.h"
#include "fd-util.h"
#include "log.h"
#include "profile-pick.h"
#include "event-text.h"
#include "prompt-text.h"
#include "string-util.h"
#include "verbs.h"

#define FOLLOW_POLL_NSEC 250000000L

typedef struct Filter {
        uint64_t since;
        const char *session, *source;
} Filter;

static bool wanted(const Filter *f, json_t *ev) {
        if (f->since) {
                uint64_t t;
                if (event_time_parse(json_string_value(json_object_get(ev, "time")), &t) < 0 || t < f->since)
                        return false;
        }
        if (f->session) {
                const char *s = json_string_value(json_object_get(ev, "session"));
                if (!s || !startswith(s, f->session))
                        return false;
        }
        if (f->source && !streq_ptr(json_string_value(json_object_get(ev, "source")), f->source))
                return false;
        return true;
}

static void put_text(json_t *ev) {
        const char *t = json_string_value(json_object_get(ev, "time")) ?: "?";
        /* "2026-12-01T23:59:01.123456Z" shown to the millisecond. */
        if (strlen(t) == 27)
                printf("%.10s %.12sZ", t, t + 11);
        else {
                _cleanup_free_ char *tv = event_text_value(json_object_get(ev, "time"));
                fputs(tv ?: "?", stdout);
        }
        const char *sess = json_string_value(json_object_get(ev, "session"));
        printf("  ");
        if (sess) {
                _cleanup_free_ char *v = prompt_visible(sess, strnlen(sess, 8));
                printf("%-8s", v ? v : "?");
        } else
                printf("%-8s", "-");
        json_t *src = json_object_get(ev, "source"), *kind = json_object_get(ev, "kind");
        _cleanup_free_ char *vs = prompt_visible(json_string_value(src) ?: "?", json_string_length(src)),
                            *vk = prompt_visible(json_string_value(kind) ?: "?", json_string_length(kind));
        printf("  %-10s %-13s", vs ? vs : "?", vk ? vk : "?");
        _cleanup_free_ char *d = event_text_data(json_object_get(ev, "data"));
        fputs(d ?: " ?", stdout);
        putchar('\n');
}

static void put_record(json_t *ev, bool json) {
        if (!json) {
                put_text(ev);
                return;
        }
        char *s = json_dumps(ev, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        if (s)
                puts(s);
        free(s);
}

static void pause_poll(void) {
        struct timespec ts = { 0, FOLLOW_POLL_NSEC };
        (void) nanosleep(&ts, NULL);
}

int verb_events(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "follow", no_argument, NULL, 'f' },
                { "since", required_argument, NULL, 's' },
                { "session", required_argument, NULL, 'S' },
                { "source", required_argument, NULL, 'o' },
                {},
        };
        bool json = false, follow = false;
        Filter f = {};
        const char *since = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hf", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret events [PROFILE] [--follow] [--since TIME] [--session ID]\n"
                               "                      [--source NAME] [--json] [--workspace DIR]\n\n"
                               "Print the event record of PROFILE's sandbox for the workspace, oldest first:\n"
                               "the sandbox's start and stop, sessions, escalations, the broker's decisions, the\n"
                               "git router's refusals and the files each session changed.\n"
                               "  -f, --follow     keep printing records as they are written\n"
                               "  --since TIME     from TIME on: 2026-12-01, \"2026-12-01 14:00\" (UTC), or\n"
                               "                   a duration before now (90s, 10m, 2h, 1d)\n"
                               "  --session ID     one session (its id, or the first characters of it)\n"
                               "  --source NAME    one source: sandbox, session, escalation, network, git,\n"
                               "                   paths, files, record\n"
                               "  --json           one JSON object per line (ASCII)\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'f':
                        follow = true;
                        break;
                case 's':
                        since = optarg;
                        break;
                case 'S':
                        f.session = optarg;
                        break;
                case 'o':
                        f.source = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        if (since) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t now = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
                if (event_since_parse(since, now, &f.since) < 0) {
                        log_error("--since %s: not a time; give a date (2026-12-01), a time in UTC "
                                  "(\"2026-12-01 14:00\") or a duration before now (90s, 10m, 2h, 1d)",
                                  since);
                        return EXIT_USAGE;
                }
        }
        static const char *const sources[] = { "sandbox", "session", "escalation", "network", "git",
                                               "paths",   "files",   "process",    "record",  NULL };
        if (f.source) {
                bool known = false;
                for (const char *const *k = sources; *k && !known; k++)
                        known = streq(*k, f.source);
                if (!known) {
                        log_error("--source %s: no such source; give sandbox, session, escalation, network, git, "
                                  "paths, files, process or record",
                                  f.source);
                        return EXIT_USAGE;
                }
        }
        if (f.session && strlen(f.session) == 0) {
                log_error("--session needs a session id (or its first characters, as lazaret events shows)");
                return EXIT_USAGE;
        }
        const char *name = NULL;
        if (profile_operand(argc, argv, optind, "events", &name) < 0)
                return EXIT_USAGE;
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int pr = profile_load(g, name, &cfg, &p);
        if (pr < 0)
                return profile_load_exit(pr);

        EventReader *rd = NULL;
        int r;
        for (;;) {
                r = event_reader_open(p->domain_dir, &rd);
                if (r != -ENOENT || !follow)
                        break;
                pause_poll(); /* not started yet: its record appears with it */
        }
        if (r == -ENOENT) {
                if (!json)
                        fprintf(stderr, "%s: no events on record (the sandbox has not run here)\n", p->name);
                return 0;
        }
        if (r < 0) {
                log_error("cannot read the event record in %s/%s: %s", p->domain_dir, EVENT_DIR, strerror(-r));
                return EXIT_LAZARET;
        }
        for (;;) {
                json_t *ev = NULL;
                r = event_reader_next(rd, follow, &ev);
                if (r < 0) {
                        log_error("cannot read the event record in %s/%s: %s", p->domain_dir, EVENT_DIR, strerror(-r));
                        event_reader_close(rd);
                        return EXIT_LAZARET;
                }
                if (r == 1) {
                        if (wanted(&f, ev))
                                put_record(ev, json);
                        json_decref(ev);
                        continue;
                }
                if (!follow)
                        break;
                fflush(stdout);
                pause_poll();
        }
        uint64_t skipped = event_reader_skipped(rd);
        event_reader_close(rd);
        if (skipped > 0)
                log_warning("%llu line%s of the record %s not a record and skipped", (unsigned long long) skipped,
                            skipped == 1 ? "" : "s", skipped == 1 ? "was" : "were");
        return 0;
}
