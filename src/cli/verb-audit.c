/* SPDX-License-Identifier: MIT */
/* lazaret audit [PROFILE] [--json] [--verify]: the escalation audit trail
 * of the workspace's Domain, read from its Domain Store (read-only, also
 * while the sandbox runs). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "fd-util.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "store.h"
#include "string-util.h"
#include "verbs.h"

/* Text as the escalation prompt shows it: nothing in a record can move the
 * cursor, hide itself or reorder what follows. */
static void put_visible(const char *s) {
        _cleanup_free_ char *v = prompt_visible(s ? s : "", s ? strlen(s) : 0);
        fputs(v ? v : "?", stdout);
}

int verb_audit(int argc, char **argv, const Globals *g) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "verify", no_argument, NULL, 'v' },
                {},
        };
        bool json = false, verify = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: lazaret audit [PROFILE] [--json] [--verify] [--workspace DIR]\n\n"
                               "List the host escalations of PROFILE's sandbox for the workspace, oldest first.\n"
                               "--verify checks that each record is unchanged and links to the one before it;\n"
                               "the exit status is 1 when the chain is broken.\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'v':
                        verify = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        const char *name = NULL;
        if (profile_operand(argc, argv, optind, "audit", &name) < 0)
                return EXIT_USAGE;
        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int pr = profile_load(g, name, &cfg, &p);
        if (pr < 0)
                return profile_load_exit(pr);

        json_t *records = NULL;
        int r = store_audit_read(p->domain_dir, &records);
        if (r == -ENOENT)
                records = json_array(); /* never started: nothing on record */
        else if (r < 0) {
                log_error("cannot read the audit trail in %s: %s", p->domain_dir, strerror(-r));
                return EXIT_LAZARET;
        }
        if (!records)
                return log_error("out of memory"), EXIT_LAZARET;

        uint64_t bad = 0;
        const char *why = NULL;
        int vr = verify ? audit_verify(records, &bad, &why) : 0;
        if (vr < 0 && vr != -EBADMSG) {
                json_decref(records);
                log_error("cannot verify the audit trail: %s", strerror(-vr));
                return EXIT_LAZARET;
        }
        if (json) {
                json_t *out = json_pack("{s:s, s:s, s:O}", "profile", p->name, "workspace", cfg->workspace, "records",
                                        records);
                if (out && verify)
                        json_object_set_new(out, "verified",
                                            vr == 0 ? json_pack("{s:b}", "intact", 1)
                                                    : json_pack("{s:b, s:I, s:s}", "intact", 0, "first_broken",
                                                                (json_int_t) bad, "reason", why));
                char *text = out ? json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                if (text)
                        puts(text);
                free(text);
                json_decref(out);
        } else {
                size_t i;
                json_t *e;
                if (json_array_size(records) == 0)
                        printf("%s: no escalations on record\n", p->name);
                json_array_foreach(records, i, e) {
                        json_t *code = json_object_get(e, "exit_code");
                        printf("#%lld  %s  %-7s ", (long long) json_integer_value(json_object_get(e, "seq")),
                               json_string_value(json_object_get(e, "received_at")) ?: "?",
                               json_string_value(json_object_get(e, "decision")) ?: "?");
                        if (json_is_integer(code))
                                printf("exit %-3lld ", (long long) json_integer_value(code));
                        else
                                printf("%-8s ", "-");
                        put_visible(json_string_value(json_object_get(e, "final_command"))
                                            ?: json_string_value(json_object_get(e, "command")));
                        putchar('\n');
                }
                if (verify) {
                        if (vr == 0)
                                printf("chain intact: %zu records\n", json_array_size(records));
                        else
                                printf("chain broken at record %llu: %s\n", (unsigned long long) bad, why);
                }
        }
        json_decref(records);
        return vr == 0 ? 0 : EXIT_PROBLEMS;
}
