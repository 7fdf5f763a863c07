/* SPDX-License-Identifier: MIT */
/* The report as JSON, JSON lines and SARIF 2.1.0 (report.h). Every string
 * of the model goes out through report_text() (TEXT_PLAIN), so what a
 * viewer shows of them cannot reorder or hide text; the files are pure
 * ASCII. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazaret-build.h"
#include "fd-util.h"
#include "macro.h"
#include "report.h"
#include "string-util.h"

/* A deep copy with every string sanitised. */
static json_t *clean(json_t *v) {
        if (json_is_string(v)) {
                _cleanup_free_ char *t = report_text(json_string_value(v), json_string_length(v), TEXT_PLAIN);
                return t ? json_string(t) : NULL;
        }
        if (json_is_array(v)) {
                json_t *a = json_array();
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x) if (!a || json_array_append_new(a, clean(x)) < 0) {
                        json_decref(a);
                        return NULL;
                }
                return a;
        }
        if (json_is_object(v)) {
                json_t *o = json_object();
                const char *k;
                json_t *x;
                json_object_foreach(v, k, x) if (!o || json_object_set_new(o, k, clean(x)) < 0) {
                        json_decref(o);
                        return NULL;
                }
                return o;
        }
        return json_incref(v);
}

static void dump(json_t *v, size_t flags, StrBuf *out) {
        char *s = v ? json_dumps(v, flags | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH | JSON_PRESERVE_ORDER) : NULL;
        if (!s) {
                out->oom = true;
                return;
        }
        strbuf_puts(out, s);
        strbuf_putc(out, '\n');
        free(s);
}

/* ---- JSON lines: one object per thing, each with its "type" ---- */

static void line(StrBuf *out, const char *type, json_t *o, json_t *extra) {
        json_t *l = json_pack("{s:s}", "type", type);
        if (l && extra)
                json_object_update(l, extra);
        if (l)
                json_object_update(l, o);
        dump(l, JSON_COMPACT, out);
        json_decref(l);
}

static void render_jsonl(json_t *m, StrBuf *out) {
        json_t *head = json_copy(m);
        if (!head) {
                out->oom = true;
                return;
        }
        json_object_del(head, "sandboxes");
        line(out, "report", head, NULL);
        json_decref(head);
        size_t i, k, n;
        json_t *sb, *s, *x;
        json_array_foreach(json_object_get(m, "sandboxes"), i, sb) {
                json_t *gen = json_pack("{s:O}", "generation", json_object_get(sb, "generation"));
                json_t *top = json_copy(sb);
                if (!gen || !top) {
                        json_decref(gen);
                        json_decref(top);
                        out->oom = true;
                        return;
                }
                json_object_del(top, "sessions");
                json_object_del(top, "network");
                json_object_del(top, "refusals");
                json_t *tp = json_copy(json_object_get(sb, "processes"));
                json_object_del(tp, "list");
                json_object_set_new(top, "processes", tp);
                line(out, "sandbox", top, NULL);
                json_decref(top);
                json_array_foreach(json_object_get(sb, "sessions"), k, s) {
                        json_t *ss = json_copy(s);
                        if (!ss) {
                                out->oom = true;
                                break;
                        }
                        json_object_del(ss, "escalations");
                        json_t *files = json_object_get(s, "files");
                        if (json_is_object(files)) {
                                json_t *fs = json_copy(files);
                                json_object_del(fs, "files");
                                json_object_set_new(ss, "files", fs);
                        }
                        json_t *sp = json_copy(json_object_get(s, "processes"));
                        json_object_del(sp, "list");
                        json_object_set_new(ss, "processes", sp);
                        line(out, "session", ss, gen);
                        json_decref(ss);
                        json_t *sid = json_pack("{s:O, s:O}", "generation", json_object_get(sb, "generation"),
                                                "session", json_object_get(s, "id"));
                        json_array_foreach(json_object_get(s, "escalations"), n, x) line(out, "escalation", x, sid);
                        json_array_foreach(json_object_get(files, "files"), n, x) line(out, "file", x, sid);
                        json_array_foreach(json_object_get(json_object_get(s, "processes"), "list"), n, x)
                                line(out, "process", x, sid);
                        json_decref(sid);
                }
                json_array_foreach(json_object_get(sb, "network"), k, x) line(out, "network", x, gen);
                json_array_foreach(json_object_get(sb, "refusals"), k, x) line(out, "refusal", x, gen);
                json_array_foreach(json_object_get(json_object_get(sb, "processes"), "list"), k, x)
                        line(out, "process", x, gen);
                json_decref(gen);
        }
}

/* ---- SARIF 2.1.0 ---- */

typedef struct Rule {
        const char *id, *name, *level, *text, *help;
} Rule;

/* The rule ids are stable: tools that import the report key on them. */
static const Rule RULES[] = {
        { "network.refused", "EgressRefused", "warning",
          "The sandbox tried to reach a network destination its policy does not allow.",
          "The broker or the network policy refused the connection. If the agent needs it, add the name or address "
          "to the profile's allow_egress; otherwise look at why the agent tried." },
        { "git.refused", "GitMetadataWriteRefused", "error",
          "The sandbox tried to change git metadata the git router protects.",
          "Hooks, configuration and other git metadata that run code on the host cannot be written from the "
          "sandbox. An agent that tries may be trying to escape it." },
        { "paths.protected", "ProtectedPathWriteRefused", "warning",
          "The sandbox tried to write a protected path of the workspace.",
          "The path is protected by the workspace policy ([workspace] protect)." },
        { "paths.masked", "MaskedPathAccessRefused", "warning",
          "The sandbox tried to reach a masked path of the workspace.",
          "The path is masked by the workspace policy ([workspace] mask): the sandbox cannot see it." },
        { "paths.git-directory", "GitDirectoryWriteRefused", "error",
          "The sandbox tried to make or change a directory that git would take as a repository.",
          "A directory holding HEAD with objects and refs (or commondir) is a repository to git whatever its name, "
          "and its config names commands the host's git runs. An agent that tries may be trying to escape." },
        { "paths.venv", "VirtualEnvironmentWriteRefused", "warning",
          "The sandbox tried to make or change a Python virtual environment in the workspace.",
          "A directory holding pyvenv.cfg is a virtual environment whose programs run on the host when it is used; "
          "make the sandbox's own outside the workspace." },
        { "paths.root", "WorkspaceRootChangeRefused", "warning",
          "The sandbox tried to replace or remove the workspace's own root.", "The workspace's root stays as it is." },
        { "paths.refused", "PathRefused", "warning", "The git router refused an operation on the workspace.",
          "See the event record (lazaret events --source paths) for the rule." },
        { "escalation.refused", "EscalationRefusedByPolicy", "warning",
          "A command the sandbox asked the host to run was refused without asking a person.",
          "The escalation policy (or the lack of a terminal to ask on) refused the request." },
        { "escalation.denied", "EscalationDenied", "note",
          "A person denied a command the sandbox asked the host to run.", "The person at the terminal said no." },
};

static size_t rule_index(const char *id) {
        for (size_t i = 0; i < ELEMENTSOF(RULES); i++)
                if (streq(RULES[i].id, id))
                        return i;
        return SIZE_MAX;
}

static json_t *plain(const char *s) {
        _cleanup_free_ char *t = report_text(s ?: "", strlen(s ?: ""), TEXT_PLAIN);
        return t ? json_string(t) : NULL;
}

/* A relative path as a URI reference: every byte but the unreserved ones
 * and "/" percent-encoded. */
static json_t *path_uri(const char *p) {
        StrBuf b = STRBUF_INIT;
        strbuf_puts(&b, "");
        while (*p == '/')
                p++;
        for (; *p; p++) {
                unsigned char c = (unsigned char) *p;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c))
                        strbuf_putc(&b, (char) c);
                else
                        strbuf_printf(&b, "%%%02X", c);
        }
        _cleanup_free_ char *s = strbuf_steal(&b);
        return s ? json_string(s) : NULL;
}

static char *fingerprint(const char *key) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        for (const unsigned char *p = (const unsigned char *) key; *p; p++)
                h = (h ^ *p) * UINT64_C(0x100000001b3);
        char *s = NULL;
        return asprintf(&s, "%016" PRIx64, h) < 0 ? NULL : s;
}

static void add_result(json_t *results, const char *rule, const char *message, json_t *location, json_int_t count,
                       const char *key, json_t *props) {
        size_t idx = rule_index(rule);
        _cleanup_free_ char *fp = fingerprint(key);
        json_t *r =
                json_pack("{s:s, s:I, s:s, s:{s:o}, s:I, s:{s:s?}, s:o}", "ruleId", rule, "ruleIndex", (json_int_t) idx,
                          "level", RULES[idx].level, "message", "text", plain(message), "occurrenceCount",
                          count > 0 ? count : 1, "partialFingerprints", "lazaretAttempt/v1", fp, "properties", props);
        if (r && location)
                json_object_set_new(r, "locations", json_pack("[o]", location));
        else
                json_decref(location);
        if (r)
                json_array_append_new(results, r);
}

static json_t *times(json_t *e, json_t *sb) {
        return json_pack("{s:O, s:O, s:O}", "generation", json_object_get(sb, "generation"), "first",
                         json_object_get(e, "first"), "last", json_object_get(e, "last"));
}

static void sarif_network(json_t *results, json_t *sb, json_t *e) {
        if (!streq_ptr(json_string_value(json_object_get(e, "verdict")), "refused"))
                return;
        const char *host = json_string_value(json_object_get(e, "host")) ?: "(no request)";
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        const char *reason = json_string_value(json_object_get(e, "reason")) ?: "not allowed";
        json_int_t n = json_integer_value(json_object_get(e, "count"));
        _cleanup_free_ char *msg = NULL, *dest = NULL, *key = NULL;
        if (asprintf(&dest, "%s:%" PRIi64, host, (int64_t) port) < 0 ||
            asprintf(&msg, "Connection to %s refused (%s), %" PRIi64 " time%s.", dest, reason, (int64_t) n,
                     n == 1 ? "" : "s") < 0 ||
            asprintf(&key, "network\x1f%s\x1f%s", dest, reason) < 0)
                return;
        json_t *props = times(e, sb);
        if (props)
                json_object_set_new(props, "reason", plain(reason));
        add_result(results, "network.refused", msg,
                   json_pack("{s:[{s:o, s:s}]}", "logicalLocations", "name", plain(dest), "kind", "resource"), n, key,
                   props);
}

static void sarif_refusal(json_t *results, json_t *sb, json_t *e) {
        const char *source = json_string_value(json_object_get(e, "source")) ?: "paths";
        const char *rule = json_string_value(json_object_get(e, "rule")) ?: "";
        const char *op = json_string_value(json_object_get(e, "op")) ?: "?";
        const char *path = json_string_value(json_object_get(e, "path")) ?: "";
        const char *err = json_string_value(json_object_get(e, "errno")) ?: "?";
        json_int_t n = json_integer_value(json_object_get(e, "count"));
        char id[32];
        if (streq(source, "git"))
                snprintf(id, sizeof(id), "git.refused");
        else {
                snprintf(id, sizeof(id), "paths.%s", rule);
                if (rule_index(id) == SIZE_MAX)
                        snprintf(id, sizeof(id), "paths.refused");
        }
        _cleanup_free_ char *msg = NULL, *key = NULL;
        if (asprintf(&msg, "%s of %s refused (%s), %" PRIi64 " time%s.", op, path, err, (int64_t) n,
                     n == 1 ? "" : "s") < 0 ||
            asprintf(&key, "%s\x1f%s\x1f%s", id, op, path) < 0)
                return;
        json_t *props = times(e, sb);
        if (props) {
                json_object_set_new(props, "operation", plain(op));
                json_object_set_new(props, "errno", plain(err));
        }
        add_result(results, id, msg,
                   json_pack("{s:{s:{s:o, s:s}}}", "physicalLocation", "artifactLocation", "uri", path_uri(path),
                             "uriBaseId", "WORKSPACE"),
                   n, key, props);
}

static void sarif_escalation(json_t *results, json_t *sb, json_t *s, json_t *e) {
        const char *dec = json_string_value(json_object_get(e, "decision"));
        if (!dec || (!streq(dec, "refused") && !streq(dec, "denied")))
                return;
        const char *cmd = json_string_value(json_object_get(e, "command")) ?: "?";
        const char *reason = json_string_value(json_object_get(e, "reason"));
        _cleanup_free_ char *msg = NULL, *key = NULL;
        if (asprintf(&msg, "Escalation of \"%s\" %s%s%s%s.", cmd, dec, reason ? " (" : "", reason ?: "",
                     reason ? ")" : "") < 0 ||
            asprintf(&key, "escalation\x1f%s", json_string_value(json_object_get(e, "request_id")) ?: "") < 0)
                return;
        json_t *props = json_pack("{s:O, s:o, s:o, s:O}", "generation", json_object_get(sb, "generation"), "session",
                                  plain(json_string_value(json_object_get(s, "id"))), "request_id",
                                  plain(json_string_value(json_object_get(e, "request_id"))), "requested",
                                  json_object_get(e, "requested"));
        add_result(results, streq(dec, "refused") ? "escalation.refused" : "escalation.denied", msg,
                   json_pack("{s:[{s:o, s:s}]}", "logicalLocations", "name", plain(cmd), "kind", "function"), 1, key,
                   props);
}

/* "2026-12-01T23:59:01.123456Z" is already what SARIF's date-time wants. */
static void render_sarif(json_t *m, StrBuf *out) {
        json_t *rules = json_array(), *results = json_array(), *notes = json_array();
        for (size_t i = 0; rules && i < ELEMENTSOF(RULES); i++)
                json_array_append_new(rules,
                                      json_pack("{s:s, s:s, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}", "id", RULES[i].id,
                                                "name", RULES[i].name, "shortDescription", "text", RULES[i].text,
                                                "fullDescription", "text", RULES[i].text, "help", "text", RULES[i].help,
                                                "defaultConfiguration", "level", RULES[i].level));
        size_t i, k, n;
        json_t *sb, *s, *e;
        json_array_foreach(json_object_get(m, "sandboxes"), i, sb) {
                json_array_foreach(json_object_get(sb, "sessions"), k, s)
                        json_array_foreach(json_object_get(s, "escalations"), n, e) sarif_escalation(results, sb, s, e);
                json_array_foreach(json_object_get(sb, "network"), k, e) sarif_network(results, sb, e);
                json_array_foreach(json_object_get(sb, "refusals"), k, e) sarif_refusal(results, sb, e);
                json_t *om = json_object_get(sb, "omitted");
                json_int_t on = json_integer_value(json_object_get(om, "network")),
                           orf = json_integer_value(json_object_get(om, "refusals"));
                if (on + orf > 0) {
                        char msg[200];
                        snprintf(msg, sizeof(msg),
                                 "Sandbox run %" PRIi64 ": %" PRIi64 " more destinations and %" PRIi64
                                 " more paths than the report lists (%d of each).",
                                 (int64_t) json_integer_value(json_object_get(sb, "generation")), (int64_t) on,
                                 (int64_t) orf, REPORT_DISTINCT_MAX);
                        json_array_append_new(notes,
                                              json_pack("{s:{s:s}, s:s}", "message", "text", msg, "level", "warning"));
                }
        }
        json_t *rec = json_object_get(m, "record");
        json_int_t dropped = json_integer_value(json_object_get(rec, "dropped"));
        if (dropped > 0) {
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "%" PRIi64 " records were dropped when they came faster than they could be written.",
                         (int64_t) dropped);
                json_array_append_new(notes, json_pack("{s:{s:s}, s:s}", "message", "text", msg, "level", "warning"));
        }
        json_int_t aggregated = json_integer_value(json_object_get(rec, "aggregated"));
        if (aggregated > 0) {
                char msg[200];
                snprintf(msg, sizeof(msg),
                         "%" PRIi64 " refusals were aggregated: counted, not recorded one by one "
                         "(occurrenceCount includes them).",
                         (int64_t) aggregated);
                json_array_append_new(notes, json_pack("{s:{s:s}, s:s}", "message", "text", msg, "level", "note"));
        }
        json_int_t rotated = json_integer_value(json_object_get(rec, "rotated"));
        if (rotated > 0) {
                char msg[200];
                snprintf(msg, sizeof(msg),
                         "%" PRIi64 " older records were rotated away with the record's oldest segments "
                         "(sessions, escalations and the sandbox's starts and stops were kept).",
                         (int64_t) rotated);
                json_array_append_new(notes, json_pack("{s:{s:s}, s:s}", "message", "text", msg, "level", "warning"));
        }
        const char *ws = json_string_value(json_object_get(m, "workspace"));
        json_t *base = NULL;
        if (ws && ws[0] == '/') {
                json_t *u = path_uri(ws);
                _cleanup_free_ char *uri = NULL;
                if (u && asprintf(&uri, "file:///%s%s", json_string_value(u),
                                  (json_string_length(u) > 0 && json_string_value(u)[json_string_length(u) - 1] == '/')
                                          ? ""
                                          : "/") >= 0)
                        base = json_pack("{s:{s:s}}", "WORKSPACE", "uri", uri);
                json_decref(u);
        }
        json_t *inv = json_pack("{s:b, s:o}", "executionSuccessful", 1, "toolExecutionNotifications", notes);
        const char *first = json_string_value(json_object_get(rec, "first"));
        const char *last = json_string_value(json_object_get(rec, "last"));
        if (inv && first && last) {
                json_object_set_new(inv, "startTimeUtc", plain(first));
                json_object_set_new(inv, "endTimeUtc", plain(last));
        }
        json_t *run = json_pack(
                "{s:{s:{s:s, s:s, s:o}}, s:o, s:[o], s:{s:o, s:O, s:o}}", "tool", "driver", "name", "lazaret",
                "version", LAZARET_VERSION, "rules", rules, "results", results, "invocations", inv, "properties",
                "profile", plain(json_string_value(json_object_get(m, "profile"))), "generated",
                json_object_get(m, "generated"), "session",
                json_is_string(json_object_get(m, "session")) ? plain(json_string_value(json_object_get(m, "session")))
                                                              : json_null());
        if (run && base)
                json_object_set_new(run, "originalUriBaseIds", base);
        else
                json_decref(base);
        json_t *log =
                json_pack("{s:s, s:s, s:[o]}", "$schema",
                          "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
                          "version", "2.1.0", "runs", run);
        dump(log, JSON_INDENT(2), out);
        json_decref(log);
}

void report_render(json_t *m, ReportFormat f, StrBuf *out) {
        switch (f) {
        case REPORT_MD:
        case REPORT_HTML:
                report_render_doc(m, f == REPORT_HTML, out);
                return;
        case REPORT_JSON: {
                json_t *c = clean(m);
                dump(c, JSON_INDENT(2), out);
                json_decref(c);
                return;
        }
        case REPORT_JSONL: {
                json_t *c = clean(m);
                if (c)
                        render_jsonl(c, out);
                else
                        out->oom = true;
                json_decref(c);
                return;
        }
        case REPORT_SARIF:
                render_sarif(m, out);
                return;
        default:
                return;
        }
}
