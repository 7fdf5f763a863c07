/* SPDX-License-Identifier: MIT */
/* lazaret doctor's context (doctor-internal.h): who runs it, the results'
 * text, running a command with a timeout and describing its failure, and
 * the Podman and runsc probes several checks share (each run once). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-internal.h"
#include "fd-util.h"
#include "log.h"
#include "strbuf.h"

/* ======================================================================
 * Wrappers with side effects
 * ====================================================================== */

DoctorContext *context_free(DoctorContext *c) {
        if (!c)
                return NULL;
        free(c->who);
        free(c->user_word);
        free(c->search_path);
        free(c->runsc_configured);
        free(c->memory_cgroup_configured);
        free(c->podman_path);
        free(c->podman_error);
        doctor_podman_info_done(&c->podman_info);
        free(c->runsc_path);
        free(c->runsc_error);
        free(c->runsc_version);
        free(c);
        return NULL;
}

static char *strdup_vprintf(const char *fmt, va_list ap) _printf_(1, 0);
static char *strdup_vprintf(const char *fmt, va_list ap) {
        char *s;
        if (vasprintf(&s, fmt, ap) < 0)
                return NULL;
        return s;
}

char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *s = strdup_vprintf(fmt, ap);
        va_end(ap);
        return s;
}

/* A word the shell takes literally: unchanged when it only has safe
 * characters, otherwise single-quoted. NULL on OOM. */
char *shell_word(const char *s) {
        if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.,/+=:@%") == strlen(s))
                return strdup(s);
        StrBuf b = STRBUF_INIT;
        strbuf_putc(&b, '\'');
        for (const char *p = s; *p; p++)
                if (*p == '\'')
                        strbuf_puts(&b, "'\\''");
                else
                        strbuf_putc(&b, *p);
        strbuf_putc(&b, '\'');
        return strbuf_steal(&b);
}

/* Details are one line: control characters (including ESC, so a tool's
 * output cannot repaint the terminal) become '?'. */
static void sanitize_line(char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        *s = *s == '\n' || *s == '\t' ? ' ' : '?';
}

static int result_vset(DoctorResult *r, DoctorStatus status, char *fix, const char *fmt, va_list ap) _printf_(4, 0);
static int result_vset(DoctorResult *r, DoctorStatus status, char *fix, const char *fmt, va_list ap) {
        char *detail = strdup_vprintf(fmt, ap);
        if (!detail) {
                free(fix);
                return -ENOMEM;
        }
        sanitize_line(detail);
        free(r->detail);
        free(r->fix);
        r->detail = detail;
        r->fix = fix;
        r->status = status;
        return 0;
}

int result_ok(DoctorResult *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int k = result_vset(r, DOCTOR_OK, NULL, fmt, ap);
        va_end(ap);
        return k;
}

/* The check failed: a problem when it is required, else a warning. Takes
 * ownership of fix, which every failure must have (NULL means OOM). */
int result_fail(DoctorResult *r, char *fix, const char *fmt, ...) {
        if (!fix)
                return -ENOMEM;
        va_list ap;
        va_start(ap, fmt);
        int k = result_vset(r, r->required ? DOCTOR_PROBLEM : DOCTOR_WARNING, fix, fmt, ap);
        va_end(ap);
        return k;
}

int command_run(const DoctorContext *c, const char *path, const char *const *argv, ExecResult *ret) {
        log_debug("doctor: running %s", path);
        return exec_capture(path, argv, c->timeout_usec, ret);
}

/* The last non-empty line of s, trimmed and capped, as a new string. */
static char *last_line(const char *s) {
        const char *best = NULL;
        size_t best_len = 0;
        for (const char *line = s; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                const char *b = line;
                while (len > 0 && (*b == ' ' || *b == '\t')) {
                        b++;
                        len--;
                }
                while (len > 0 && (b[len - 1] == ' ' || b[len - 1] == '\t' || b[len - 1] == '\r'))
                        len--;
                if (len > 0) {
                        best = b;
                        best_len = len;
                }
                line = nl ? nl + 1 : NULL;
        }
        if (!best)
                return strdup("");
        return strndup(best, size_min(best_len, ERROR_LINE_MAX));
}

/* "podman info failed (exit status 125): Error: ..." and the like. */
char *describe_command_failure(const DoctorContext *c, const char *what, const ExecResult *cmd) {
        if (cmd->spawn_error < 0)
                return strdup_printf("cannot run %s: %s", what, strerror(-cmd->spawn_error));
        if (cmd->timed_out)
                return strdup_printf("%s did not finish within %" PRIu64 " s and was killed", what,
                                     c->timeout_usec / 1000000);
        _cleanup_free_ char *line = last_line(cmd->err && *cmd->err ? cmd->err : cmd->out);
        if (!line)
                return NULL;
        if (cmd->status > 128)
                return strdup_printf("%s was killed by signal %d%s%s", what, cmd->status - 128, *line ? ": " : "",
                                     line);
        return strdup_printf("%s failed (exit status %d)%s%s", what, cmd->status, *line ? ": " : "", line);
}

int context_new(const DoctorOptions *opts, const char *user, DoctorContext **ret) {
        _cleanup_(context_freep) DoctorContext *c = calloc(1, sizeof(DoctorContext));
        if (!c)
                return -ENOMEM;
        c->uid = geteuid();
        c->rootless = c->uid != 0;
        c->user = user;
        c->podman_info.rootless = -1;
        c->timeout_usec = opts && opts->timeout_usec > 0 ? opts->timeout_usec : DOCTOR_TIMEOUT_USEC_DEFAULT;

        const char *search = opts && opts->path ? opts->path : getenv("PATH");
        c->search_path = strdup(search ? search : DEFAULT_SEARCH_PATH);
        if (opts && opts->runsc && !(c->runsc_configured = strdup(opts->runsc)))
                return -ENOMEM;
        if (opts && opts->memory_cgroup && !(c->memory_cgroup_configured = strdup(opts->memory_cgroup)))
                return -ENOMEM;
        c->who = user ? strdup(user) : strdup_printf("uid %u", (unsigned) c->uid);
        if (user)
                c->user_word = shell_word(user);
        else
                c->user_word = strdup_printf("%u", (unsigned) c->uid);
        if (!c->search_path || !c->who || !c->user_word)
                return -ENOMEM;
        *ret = TAKE_PTR(c);
        return 0;
}

int podman_probe(DoctorContext *c) {
        _cleanup_(exec_result_done) ExecResult v = {}, info = {};
        int r;

        if (c->podman_probed)
                return 0;
        c->podman_probed = true;

        r = exec_find_program(c->search_path, "podman", &c->podman_path);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;

        r = command_run(c, c->podman_path, (const char *const[]){ "podman", "--version", NULL }, &v);
        if (r < 0)
                return r;
        if (exec_result_failed(&v)) {
                c->podman_version_failed = true;
                c->podman_error = describe_command_failure(c, "podman --version", &v);
                return c->podman_error ? 0 : -ENOMEM;
        }
        c->podman_version_ok = doctor_parse_podman_version(v.out, c->podman_version) >= 0;

        r = command_run(c, c->podman_path, (const char *const[]){ "podman", "info", "--format", "json", NULL }, &info);
        if (r < 0)
                return r;
        if (exec_result_failed(&info)) {
                c->podman_timed_out = info.timed_out;
                c->podman_error = describe_command_failure(c, "podman info", &info);
                return c->podman_error ? 0 : -ENOMEM;
        }
        r = doctor_parse_podman_info(info.out, strlen(info.out), &c->podman_info);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                c->podman_error = strdup("podman info --format json printed no usable JSON");
                return c->podman_error ? 0 : -ENOMEM;
        }
        c->podman_info_ok = true;
        return 0;
}

int runsc_probe(DoctorContext *c) {
        _cleanup_(exec_result_done) ExecResult v = {};
        int r;

        if (c->runsc_probed)
                return 0;
        c->runsc_probed = true;

        if (c->runsc_configured) {
                c->runsc_path = strdup(c->runsc_configured);
                r = c->runsc_path ? 0 : -ENOMEM;
        } else
                r = exec_find_program(c->search_path, "runsc", &c->runsc_path);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        r = command_run(c, c->runsc_path, (const char *const[]){ "runsc", "--version", NULL }, &v);
        if (r < 0)
                return r;
        if (exec_result_failed(&v)) {
                c->runsc_error = describe_command_failure(c, "runsc --version", &v);
                return c->runsc_error ? 0 : -ENOMEM;
        }
        r = doctor_parse_runsc_release(v.out, &c->runsc_release, &c->runsc_version);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* Runs, but says no date: keep the word for the report. */
                const char *w = find_line(v.out, "runsc version ");
                if (w) {
                        c->runsc_version = strndup(w, strcspn(w, " \t\r\n"));
                        if (!c->runsc_version)
                                return -ENOMEM;
                }
        }
        return 0;
}

/* "YYYY-MM-DD" of a release date, in buf. */
const char *format_release(unsigned date, char buf[static 16]) {
        snprintf(buf, 16, "%04u-%02u-%02u", date / 10000, date / 100 % 100, date % 100);
        return buf;
}
