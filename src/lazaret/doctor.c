/* SPDX-License-Identifier: MIT */
/* lazaret doctor (doctor.h): each check of the host (Podman, its version,
 * storage driver and rootless mode, runsc and its files, runc, subordinate
 * ids and newuidmap, /dev/fuse, fuse-overlayfs, fuse2fs, /dev/net/tun,
 * slirp4netns, cgroups, limits) as a pure function over what was read,
 * which the unit tests feed, and the runner that reads the host for them. Some 1,500 lines: a
 * check is short, and keeping the pure parsers next to the probe that
 * reads their input makes each check one place to read. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "doctor.h"
#include "native-probe.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"

#define PODMAN_MIN_VERSION                                                                                             \
        { 4, 3, 0 }
#define SUBID_NEEDED   UINT64_C(65536)
#define SUBID_FILE_MAX (4U * 1024 * 1024)
#define ERROR_LINE_MAX 240

static inline size_t size_min(size_t a, size_t b) {
        return a < b ? a : b;
}

static inline bool is_digit(char ch) {
        return ch >= '0' && ch <= '9';
}

/* ======================================================================
 * Pure helpers
 * ====================================================================== */

const char *doctor_status_to_string(DoctorStatus s) {
        switch (s) {
        case DOCTOR_OK:
                return "ok";
        case DOCTOR_PROBLEM:
                return "problem";
        case DOCTOR_WARNING:
                return "warning";
        case _DOCTOR_STATUS_MAX:
        case _DOCTOR_STATUS_INVALID:
                break;
        }
        return NULL;
}

const char *doctor_cgroup_mode_to_string(DoctorCgroupMode m) {
        switch (m) {
        case DOCTOR_CGROUP_UNIFIED:
                return "unified";
        case DOCTOR_CGROUP_HYBRID:
                return "hybrid";
        case DOCTOR_CGROUP_LEGACY:
                return "legacy";
        case _DOCTOR_CGROUP_MODE_MAX:
        case _DOCTOR_CGROUP_MODE_INVALID:
                break;
        }
        return NULL;
}

/* Parse a run of decimal digits (at most 9, so no overflow). Returns the
 * number of characters used, 0 when s does not start with a digit. */
static size_t parse_small_uint(const char *s, unsigned *ret) {
        unsigned v = 0;
        size_t i = 0;
        while (is_digit(s[i])) {
                if (i >= 9)
                        return 0;
                v = v * 10 + (unsigned) (s[i] - '0');
                i++;
        }
        if (i > 0)
                *ret = v;
        return i;
}

/* Find the line that starts with prefix; returns the rest of it or NULL. */
static const char *find_line(const char *text, const char *prefix) {
        for (const char *line = text; line && *line;) {
                const char *rest = startswith(line, prefix);
                if (rest)
                        return rest;
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        return NULL;
}

static bool date_plausible(unsigned d) {
        unsigned y = d / 10000, m = d / 100 % 100, day = d % 100;
        return y >= 2015 && y <= 2099 && m >= 1 && m <= 12 && day >= 1 && day <= 31;
}

int doctor_parse_runsc_release(const char *output, unsigned *ret_date, char **ret_version) {
        if (!output || !ret_date)
                return -EINVAL;

        const char *v = find_line(output, "runsc version ");
        if (!v)
                return -EINVAL;
        v += strspn(v, " \t");
        size_t len = strcspn(v, " \t\r\n");
        if (len == 0)
                return -EINVAL;

        /* Upstream says "release-20240807.0", Debian "0.0~20221219.0": in both
         * the date is the first run of exactly eight digits. */
        unsigned date = 0;
        for (size_t i = 0; i < len;) {
                if (!is_digit(v[i])) {
                        i++;
                        continue;
                }
                size_t j = i;
                while (j < len && is_digit(v[j]))
                        j++;
                if (j - i == 8) {
                        unsigned d = 0;
                        for (size_t k = i; k < j; k++)
                                d = d * 10 + (unsigned) (v[k] - '0');
                        if (date_plausible(d)) {
                                date = d;
                                break;
                        }
                }
                i = j;
        }
        if (date == 0)
                return -ENODATA;

        if (ret_version) {
                char *s = strndup(v, len);
                if (!s)
                        return -ENOMEM;
                *ret_version = s;
        }
        *ret_date = date;
        return 0;
}

int doctor_parse_podman_version(const char *output, unsigned ret[3]) {
        if (!output || !ret)
                return -EINVAL;
        const char *p = find_line(output, "podman version ");
        if (!p)
                return -EINVAL;
        p += strspn(p, " \t");

        unsigned v[3] = {};
        for (unsigned i = 0; i < 3; i++) {
                size_t n = parse_small_uint(p, &v[i]);
                if (n == 0) {
                        if (i < 2) /* major and minor are required */
                                return -EINVAL;
                        break;
                }
                p += n;
                if (i < 2) {
                        if (*p != '.') {
                                if (i == 0)
                                        return -EINVAL;
                                break;
                        }
                        p++;
                }
        }
        /* Anything may follow the numbers ("-dev", "+ds1"), but not more digits glued on. */
        if (is_digit(*p))
                return -EINVAL;
        memcpy(ret, v, sizeof v);
        return 0;
}

int doctor_version_compare(const unsigned a[3], const unsigned b[3]) {
        for (unsigned i = 0; i < 3; i++)
                if (a[i] != b[i])
                        return a[i] < b[i] ? -1 : 1;
        return 0;
}

int doctor_parse_kernel_release(const char *release, unsigned *ret_major, unsigned *ret_minor) {
        unsigned major, minor;
        if (!release)
                return -EINVAL;
        size_t n = parse_small_uint(release, &major);
        if (n == 0 || release[n] != '.')
                return -EINVAL;
        if (parse_small_uint(release + n + 1, &minor) == 0)
                return -EINVAL;
        *ret_major = major;
        *ret_minor = minor;
        return 0;
}

bool doctor_runsc_sandbox_network_works(unsigned release, int rmem_visible) {
        if (rmem_visible == 0)
                return true;
        /* Visible, or unknown: only a fixed runsc is known to cope. */
        return release >= DOCTOR_RUNSC_NETWORK_FIXED_RELEASE;
}

typedef struct SubIdEntry {
        const char *owner;
        size_t owner_len;
        uint64_t start;
        uint64_t count;
} SubIdEntry;

/* A decimal field of 1..10 digits whose value is <= max. */
static bool parse_id_field(const char *s, size_t len, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;
        if (len == 0 || len > 10)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (!is_digit(s[i]))
                        return false;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        if (v > max)
                return false;
        *ret = v;
        return true;
}

/* "owner:start:count", trailing blanks and CR tolerated. */
static bool subid_parse_line(const char *line, size_t len, SubIdEntry *ret) {
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t' || line[len - 1] == '\r'))
                len--;
        const char *c1 = memchr(line, ':', len);
        if (!c1 || c1 == line)
                return false;
        const char *f2 = c1 + 1, *end = line + len;
        const char *c2 = memchr(f2, ':', (size_t) (end - f2));
        if (!c2)
                return false;
        const char *f3 = c2 + 1;

        SubIdEntry e = { .owner = line, .owner_len = (size_t) (c1 - line) };
        if (!parse_id_field(f2, (size_t) (c2 - f2), UINT32_MAX, &e.start) ||
            !parse_id_field(f3, (size_t) (end - f3), UINT32_MAX, &e.count) || e.count == 0)
                return false;
        *ret = e;
        return true;
}

static bool subid_owner_matches(const SubIdEntry *e, const char *user, uid_t uid) {
        if (user && e->owner_len == strlen(user) && memcmp(e->owner, user, e->owner_len) == 0)
                return true;
        uint64_t v;
        return parse_id_field(e->owner, e->owner_len, UINT32_MAX, &v) && v == (uint64_t) uid;
}

/* Call f for each well-formed line of text. */
static int subid_foreach(const char *text, int (*f)(const SubIdEntry *e, void *userdata), void *userdata) {
        for (const char *line = text; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                SubIdEntry e;
                if (subid_parse_line(line, len, &e)) {
                        int r = f(&e, userdata);
                        if (r < 0)
                                return r;
                }
                line = nl ? nl + 1 : NULL;
        }
        return 0;
}

typedef struct SubIdCount {
        const char *user;
        uid_t uid;
        uint64_t count;
        unsigned entries;
} SubIdCount;

static int subid_count_one(const SubIdEntry *e, void *userdata) {
        SubIdCount *c = userdata;
        if (subid_owner_matches(e, c->user, c->uid)) {
                c->count += e->count;
                c->entries++;
        }
        return 0;
}

int doctor_subid_count(const char *text, const char *user, uid_t uid, uint64_t *ret_count, unsigned *ret_entries) {
        SubIdCount c = { .user = user, .uid = uid };
        if (!ret_count)
                return -EINVAL;
        int r = subid_foreach(text, subid_count_one, &c);
        if (r < 0)
                return r;
        *ret_count = c.count;
        if (ret_entries)
                *ret_entries = c.entries;
        return 0;
}

typedef struct SubIdRanges {
        SubIdEntry *v;
        size_t n;
        size_t cap;
} SubIdRanges;

static int subid_collect_one(const SubIdEntry *e, void *userdata) {
        SubIdRanges *rs = userdata;
        if (rs->n == rs->cap) {
                size_t cap = rs->cap ? rs->cap * 2 : 16;
                SubIdEntry *v = reallocarray(rs->v, cap, sizeof(SubIdEntry));
                if (!v)
                        return -ENOMEM;
                rs->v = v;
                rs->cap = cap;
        }
        rs->v[rs->n++] = *e;
        return 0;
}

static int subid_cmp_start(const void *a, const void *b) {
        const SubIdEntry *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

int doctor_subid_free_range(const char *const *texts, size_t n, uint64_t count, uint64_t *ret_start) {
        _cleanup_free_ SubIdEntry *owned = NULL;
        SubIdRanges rs = {};
        int r = 0;

        if (count == 0 || count > UINT32_MAX || !ret_start || (n > 0 && !texts))
                return -EINVAL;
        for (size_t i = 0; i < n && r >= 0; i++)
                r = subid_foreach(texts[i], subid_collect_one, &rs);
        owned = rs.v;
        if (r < 0)
                return r;
        if (rs.n > 0)
                qsort(rs.v, rs.n, sizeof(SubIdEntry), subid_cmp_start);

        /* shadow's own allocator starts at SUB_UID_MIN = 100000. */
        uint64_t cand = 100000;
        for (size_t i = 0; i < rs.n; i++) {
                uint64_t s = rs.v[i].start, e = s + rs.v[i].count;
                if (e <= cand)
                        continue;
                if (s >= cand + count)
                        break;
                cand = e;
        }
        /* The last usable id is 2^32-2: (uid_t) -1 means "no id". */
        if (cand + count - 1 > (uint64_t) UINT32_MAX - 1)
                return -ENOSPC;
        *ret_start = cand;
        return 0;
}

static uint32_t le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

bool doctor_file_caps_have(const void *xattr, size_t size, unsigned cap) {
        const uint8_t *p = xattr;
        size_t need;
        unsigned words;

        if (!p || size < 4 || cap >= 64)
                return false;
        switch (le32(p) & VFS_CAP_REVISION_MASK) {
        case VFS_CAP_REVISION_1:
                need = XATTR_CAPS_SZ_1;
                words = 1;
                break;
        case VFS_CAP_REVISION_2:
                need = XATTR_CAPS_SZ_2;
                words = 2;
                break;
        case VFS_CAP_REVISION_3:
                need = XATTR_CAPS_SZ_3;
                words = 2;
                break;
        default:
                return false;
        }
        if (size < need || cap / 32 >= words)
                return false;
        /* data[i] = { permitted, inheritable } follows the magic word. */
        return (le32(p + 4 + (cap / 32) * 8) >> (cap % 32)) & 1;
}

DoctorCgroupMode doctor_cgroup_mode_from_magic(int64_t root_magic, int64_t unified_magic) {
        if (root_magic == (int64_t) CGROUP2_SUPER_MAGIC)
                return DOCTOR_CGROUP_UNIFIED;
        if (root_magic != (int64_t) TMPFS_MAGIC)
                return _DOCTOR_CGROUP_MODE_INVALID;
        if (unified_magic == (int64_t) CGROUP2_SUPER_MAGIC)
                return DOCTOR_CGROUP_HYBRID;
        return DOCTOR_CGROUP_LEGACY;
}

void doctor_podman_info_done(DoctorPodmanInfo *i) {
        if (!i)
                return;
        free(i->version);
        free(i->cgroup_version);
        free(i->graph_driver);
        free(i->oci_runtime);
        free(i->storage_conf);
        *i = (DoctorPodmanInfo){ .rootless = -1 };
}

static int dup_json_string(json_t *v, char **ret) {
        const char *s = json_string_value(v);
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int doctor_parse_podman_info(const char *json, size_t size, DoctorPodmanInfo *ret) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        json_error_t error;

        if (!json || !ret)
                return -EINVAL;
        root = json_loadb(json, size, 0, &error);
        if (!root || !json_is_object(root))
                return -EINVAL;

        json_t *host = json_object_get(root, "host"), *store = json_object_get(root, "store");
        if (!json_is_object(host) && !json_is_object(store))
                return -EINVAL;

        DoctorPodmanInfo i = { .rootless = -1 };
        int r = 0;
        if (r >= 0)
                r = dup_json_string(json_object_get(json_object_get(root, "version"), "Version"), &i.version);
        if (r >= 0)
                r = dup_json_string(json_object_get(host, "cgroupVersion"), &i.cgroup_version);
        if (r >= 0)
                r = dup_json_string(json_object_get(store, "graphDriverName"), &i.graph_driver);
        if (r >= 0)
                r = dup_json_string(json_object_get(json_object_get(host, "ociRuntime"), "name"), &i.oci_runtime);
        if (r >= 0)
                r = dup_json_string(json_object_get(store, "configFile"), &i.storage_conf);
        if (r < 0) {
                doctor_podman_info_done(&i);
                return r;
        }
        json_t *rootless = json_object_get(json_object_get(host, "security"), "rootless");
        if (json_is_boolean(rootless))
                i.rootless = json_is_true(rootless);
        *ret = i;
        return 0;
}

/* ======================================================================
 * Wrappers with side effects
 * ====================================================================== */

struct DoctorContext {
        uid_t uid;
        bool rootless;
        const char *user; /* borrowed from the report; NULL without a passwd entry */
        char *who; /* the user for messages: name, or "uid N" */
        char *user_word; /* the user as a shell word for fix lines */
        char *search_path;
        char *runsc_configured; /* [runtime] runsc, or NULL */
        char *memory_cgroup_configured; /* [runtime] memory_cgroup, or NULL */
        uint64_t timeout_usec;

        /* Probed once, shared by several checks. */
        bool podman_probed;
        char *podman_path; /* NULL: not found */
        char *podman_error; /* why `podman --version` or `podman info` failed */
        bool podman_version_failed; /* podman_error is about --version */
        bool podman_timed_out;
        bool podman_version_ok;
        unsigned podman_version[3];
        bool podman_info_ok;
        DoctorPodmanInfo podman_info;

        bool runsc_probed;
        char *runsc_path;
        char *runsc_error;
        char *runsc_version; /* version word, NULL when unparsable */
        unsigned runsc_release;
};

static DoctorContext *context_free(DoctorContext *c) {
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
DEFINE_TRIVIAL_CLEANUP_FUNC(DoctorContext *, context_free)

static char *strdup_vprintf(const char *fmt, va_list ap) _printf_(1, 0);
static char *strdup_vprintf(const char *fmt, va_list ap) {
        char *s;
        if (vasprintf(&s, fmt, ap) < 0)
                return NULL;
        return s;
}

static char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
static char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *s = strdup_vprintf(fmt, ap);
        va_end(ap);
        return s;
}

/* A word the shell takes literally: unchanged when it only has safe
 * characters, otherwise single-quoted. NULL on OOM. */
static char *shell_word(const char *s) {
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

static int result_ok(DoctorResult *r, const char *fmt, ...) _printf_(2, 3);
static int result_ok(DoctorResult *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int k = result_vset(r, DOCTOR_OK, NULL, fmt, ap);
        va_end(ap);
        return k;
}

/* The check failed: a problem when it is required, else a warning. Takes
 * ownership of fix, which every failure must have (NULL means OOM). */
static int result_fail(DoctorResult *r, char *fix, const char *fmt, ...) _printf_(3, 4);
static int result_fail(DoctorResult *r, char *fix, const char *fmt, ...) {
        if (!fix)
                return -ENOMEM;
        va_list ap;
        va_start(ap, fmt);
        int k = result_vset(r, r->required ? DOCTOR_PROBLEM : DOCTOR_WARNING, fix, fmt, ap);
        va_end(ap);
        return k;
}

static int command_run(const DoctorContext *c, const char *path, const char *const *argv, ExecResult *ret) {
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
static char *describe_command_failure(const DoctorContext *c, const char *what, const ExecResult *cmd) {
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

static int context_new(const DoctorOptions *opts, const char *user, DoctorContext **ret) {
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

static int podman_probe(DoctorContext *c) {
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

static int runsc_probe(DoctorContext *c) {
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
static const char *format_release(unsigned date, char buf[static 16]) {
        snprintf(buf, 16, "%04u-%02u-%02u", date / 10000, date / 100 % 100, date % 100);
        return buf;
}

/* ---- the checks ---- */

static int check_podman(DoctorContext *c, DoctorResult *r) {
        static const unsigned min[3] = PODMAN_MIN_VERSION;
        int k = podman_probe(c);
        if (k < 0)
                return k;

        if (!c->podman_path)
                return result_fail(r, strdup("sudo apt-get install podman"),
                                   "podman is not installed (not found in PATH)");
        if (!c->podman_version_ok && !c->podman_error)
                return result_fail(r, strdup("sudo apt-get install podman"),
                                   "%s --version does not report a version lazaret understands", c->podman_path);
        if (c->podman_version_ok && doctor_version_compare(c->podman_version, min) < 0)
                return result_fail(r,
                                   strdup("# install Podman 4.3 or newer (Debian 12: sudo apt-get install "
                                          "podman)\nsudo apt-get install podman"),
                                   "podman %u.%u.%u at %s is too old: lazaret needs 4.3 or newer", c->podman_version[0],
                                   c->podman_version[1], c->podman_version[2], c->podman_path);
        if (c->podman_version_failed)
                return result_fail(r, strdup("sudo apt-get install --reinstall podman"), "%s", c->podman_error);
        if (c->podman_error && c->podman_timed_out)
                return result_fail(r, strdup("# see where podman waits:\npodman --log-level=debug info"), "%s%s%s%s",
                                   c->podman_error, c->rootless ? " (as " : "", c->rootless ? c->who : "",
                                   c->rootless ? ")" : "");
        if (c->podman_error) {
                if (c->rootless)
                        return result_fail(r,
                                           strdup("# fix the subuid, subgid and newuidmap problems first, then restart "
                                                  "Podman's user namespace:\n"
                                                  "podman system migrate"),
                                           "%s (as %s)", c->podman_error, c->who);
                return result_fail(r, strdup("# see what podman reports:\npodman --log-level=debug info"), "%s",
                                   c->podman_error);
        }

        const DoctorPodmanInfo *i = &c->podman_info;
        return result_ok(r, "podman %u.%u.%u at %s (%s, cgroups %s, graph driver %s, OCI runtime %s)",
                         c->podman_version[0], c->podman_version[1], c->podman_version[2], c->podman_path,
                         c->rootless ? "rootless" : "rootful", i->cgroup_version ?: "unknown",
                         i->graph_driver ?: "unknown", i->oci_runtime ?: "unknown");
}

static int check_runsc(DoctorContext *c, DoctorResult *r) {
        char date[16];
        int k = runsc_probe(c);
        if (k < 0)
                return k;

        if (!c->runsc_path)
                return result_fail(r, strdup("sudo apt-get install runsc"),
                                   "runsc (gVisor) is not installed (not found in PATH)");
        if (c->runsc_error)
                return result_fail(r, strdup("sudo apt-get install --reinstall runsc"), "%s", c->runsc_error);
        if (c->runsc_release == 0)
                return result_ok(r, "runsc %s at %s (release date unknown)", c->runsc_version ?: "(no version)",
                                 c->runsc_path);
        return result_ok(r, "runsc %s (release %s) at %s", c->runsc_version, format_release(c->runsc_release, date),
                         c->runsc_path);
}

/* Whether net.core.rmem_default is visible in a fresh network namespace,
 * which is what runsc tests to refuse "the root network namespace".
 * Returns 1 or 0, or -errno when no namespace could be made. */
static int rmem_visible_in_new_netns(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int p[2], status, e = 0;

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        rfd = p[0];
        wfd = p[1];

        pid_t pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                int code = 0;
                if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
                        e = errno;
                        /* root may be refused a user namespace, not a network one. */
                        if (geteuid() == 0 && unshare(CLONE_NEWNET) == 0)
                                e = 0;
                }
                if (e == 0) {
                        if (access("/proc/sys/net/core/rmem_default", F_OK) == 0)
                                _exit(0);
                        if (errno == ENOENT)
                                _exit(1);
                        e = errno;
                        code = 3;
                } else
                        code = 2;
                if (write(wfd, &e, sizeof e) < 0) {
                }
                _exit(code);
        }
        wfd = safe_close(wfd);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status))
                return -EIO;
        switch (WEXITSTATUS(status)) {
        case 0:
                return 1;
        case 1:
                return 0;
        default:
                if (read(rfd, &e, sizeof e) != (ssize_t) sizeof e || e <= 0)
                        e = EIO;
                return -e;
        }
}

static int check_runsc_network(DoctorContext *c, DoctorResult *r) {
        static const char fix[] =
                "# either let runsc use the kernel network stack of the sidecar's namespace: in the profile\n"
                "# ([profiles.NAME] in ~/.config/lazaret/config.toml or ./lazaret.toml) set\n"
                "#     runsc_network = \"host\"\n"
                "# or put a runsc of release-20240807 or newer first on PATH: 'make deps' in Lazaret's source\n"
                "# (scripts/setup.sh) builds the pinned gVisor and installs /usr/local/bin/runsc";
        _cleanup_free_ char *method = NULL;
        struct utsname u;
        unsigned major = 0, minor = 0;
        char date[16];
        int k, visible;

        k = runsc_probe(c);
        if (k < 0)
                return k;

        if (uname(&u) < 0)
                return negative_errno();
        bool kernel_known = doctor_parse_kernel_release(u.release, &major, &minor) >= 0;

        visible = rmem_visible_in_new_netns();
        if (visible >= 0)
                method = strdup("checked in a new network namespace");
        else if (kernel_known) {
                int e = -visible;
                visible = major > 6 || (major == 6 && minor >= 11);
                method = strdup_printf(
                        "cannot unshare a network namespace (%s); judged by kernel version, 6.11+ shows it",
                        strerror(e));
        } else
                method = strdup_printf("cannot unshare a network namespace (%s) nor parse the kernel release",
                                       strerror(-visible));
        if (!method)
                return -ENOMEM;

        const char *where = visible > 0 ? "visible" : visible == 0 ? "not visible" : "perhaps visible";
        if (!c->runsc_path || c->runsc_error)
                return result_fail(r, strdup(fix),
                                   "runsc is not usable (see the runsc check); net.core.rmem_default is %s in a new "
                                   "network namespace on kernel %s (%s)",
                                   where, u.release, method);

        bool works = doctor_runsc_sandbox_network_works(c->runsc_release, visible);
        if (works && visible == 0)
                return result_ok(r,
                                 "net.core.rmem_default is not visible in a new network namespace on kernel %s (%s): "
                                 "runsc --network=sandbox works",
                                 u.release, method);
        if (works)
                return result_ok(
                        r,
                        "runsc release %s copes with net.core.rmem_default in every network namespace (kernel %s, %s)",
                        format_release(c->runsc_release, date), u.release, method);
        if (c->runsc_release == 0)
                return result_fail(
                        r, strdup(fix),
                        "runsc %s has no release date; runsc before release-20240807 refuses --network=sandbox when "
                        "net.core.rmem_default is %s in a new network namespace (kernel %s, %s)",
                        c->runsc_version ?: "(unknown version)", where, u.release, method);
        return result_fail(r, strdup(fix),
                           "runsc %s (release %s, before release-20240807) refuses --network=sandbox here: "
                           "net.core.rmem_default is %s in a new network namespace on kernel %s (%s)",
                           c->runsc_version, format_release(c->runsc_release, date), where, u.release, method);
}

/* statx and lstat of a symbolic link in the sandbox's own file system, in
 * a throwaway sandbox (runsc do): Debian's runsc 20221219 fails both on
 * recent kernels ("ls -l /" says "Invalid argument"), its 20240729 the
 * second ("Bad file descriptor"). */
static int check_runsc_files(DoctorContext *c, DoctorResult *r) {
        static const char fix[] = "put a current runsc first on PATH: 'make deps' in Lazaret's source "
                                  "(scripts/setup.sh) builds the pinned gVisor and installs /usr/local/bin/runsc";
        static const char script[] = "stat / >/dev/null 2>&1 || { echo statx; exit 1; }; "
                                     "ln -s / /tmp/.lazaret-probe && ls -l /tmp/.lazaret-probe >/dev/null 2>&1 || "
                                     "{ echo lstat; exit 1; }; echo ok";
        _cleanup_(exec_result_done) ExecResult v = {};
        int k = runsc_probe(c);
        if (k < 0)
                return k;
        if (!c->runsc_path || c->runsc_error)
                return result_fail(r, strdup(fix), "runsc is not usable (see the runsc check)");
        k = command_run(
                c, c->runsc_path,
                (const char *const[]){ "runsc", "--rootless", "--network=none", "do", "/bin/sh", "-c", script, NULL },
                &v);
        if (k < 0)
                return k;
        const char *out = v.out ?: "";
        if (!exec_result_failed(&v) && strstr(out, "ok"))
                return result_ok(r, "stat and lstat of a symbolic link work in runsc %s's file system",
                                 c->runsc_version ?: "(unknown version)");
        if (startswith(out, "statx"))
                return result_fail(r, strdup(fix),
                                   "runsc %s cannot stat files in its sandbox on this kernel (statx: \"ls -l /\" "
                                   "fails with \"Invalid argument\")",
                                   c->runsc_version ?: "(unknown version)");
        if (startswith(out, "lstat"))
                return result_fail(r, strdup(fix),
                                   "runsc %s cannot lstat symbolic links in its sandbox on this kernel "
                                   "(\"ls -l\" of a symlink fails)",
                                   c->runsc_version ?: "(unknown version)");
        _cleanup_free_ char *what = strdup_printf("%s --rootless --network=none do /bin/sh", c->runsc_path);
        if (!what)
                return -ENOMEM;
        _cleanup_free_ char *why = describe_command_failure(c, what, &v);
        return result_fail(r, strdup(fix), "cannot probe runsc's file system: %s", why ?: "it failed");
}

/* A tool that must be in PATH and answer --version; line_prefix picks the
 * version line out of its output (NULL: the first line). */
static int check_tool(DoctorContext *c, DoctorResult *r, const char *name, const char *package,
                      const char *line_prefix) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        _cleanup_(exec_result_done) ExecResult v = {};

        int k = exec_find_program(c->search_path, name, &path);
        if (k == -ENOENT)
                return result_fail(r, strdup_printf("sudo apt-get install %s", package),
                                   "%s is not installed (not found in PATH)", name);
        if (k < 0)
                return k;

        k = command_run(c, path, (const char *const[]){ name, "--version", NULL }, &v);
        if (k < 0)
                return k;
        if (exec_result_failed(&v)) {
                _cleanup_free_ char *what = strdup_printf("%s --version", path);
                if (!what)
                        return -ENOMEM;
                _cleanup_free_ char *why = describe_command_failure(c, what, &v);
                if (!why)
                        return -ENOMEM;
                return result_fail(r, strdup_printf("sudo apt-get install --reinstall %s", package), "%s", why);
        }

        /* Some tools print their version on stderr. */
        const char *text = *v.out ? v.out : v.err;
        const char *found = line_prefix ? find_line(text, line_prefix) : text;
        if (found && line_prefix)
                found -= strlen(line_prefix);
        if (found)
                line = strndup(found, size_min(strcspn(found, "\r\n"), ERROR_LINE_MAX));
        else
                line = strdup("version unknown");
        if (!line)
                return -ENOMEM;
        return result_ok(r, "%s at %s", line, path);
}

static int check_runc(DoctorContext *c, DoctorResult *r) {
        return check_tool(c, r, "runc", "runc", "runc version ");
}

static int check_fuse_overlayfs(DoctorContext *c, DoctorResult *r) {
        return check_tool(c, r, "fuse-overlayfs", "fuse-overlayfs", "fuse-overlayfs: version ");
}

/* The file system of each persistent directory's changes (disk_limit). */
static int check_fuse2fs(DoctorContext *c, DoctorResult *r) {
        return check_tool(c, r, "fuse2fs", "fuse2fs", "fuse2fs ");
}

static int check_slirp4netns(DoctorContext *c, DoctorResult *r) {
        if (!c->rootless)
                return result_ok(r, "rootful: not needed");
        return check_tool(c, r, "slirp4netns", "slirp4netns", "slirp4netns version ");
}

static void format_owner(uid_t uid, gid_t gid, char *buf, size_t size) {
        struct passwd *pw = getpwuid(uid);
        struct group *gr = getgrgid(gid);
        char u[32], g[32];
        if (!pw)
                snprintf(u, sizeof u, "%u", (unsigned) uid);
        if (!gr)
                snprintf(g, sizeof g, "%u", (unsigned) gid);
        snprintf(buf, size, "%s:%s", pw ? pw->pw_name : u, gr ? gr->gr_name : g);
}

static int check_device(DoctorContext *c, DoctorResult *r, const char *path, const char *module, unsigned minor,
                        const char *udev_name, const char *static_node) {
        char owner[160];
        struct stat st;

        _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return negative_errno();
                if (!S_ISCHR(st.st_mode))
                        return result_fail(
                                r, strdup_printf("sudo rm -f %s && sudo mknod -m 0666 %s c 10 %u", path, path, minor),
                                "%s is not a character device", path);
                format_owner(st.st_uid, st.st_gid, owner, sizeof owner);
                return result_ok(r, "%s (mode %04o %s) opens read-write for %s%s", path,
                                 (unsigned) (st.st_mode & 07777), owner, c->who, c->rootless ? "" : " (rootful)");
        }
        int e = errno;
        if (e == ENOENT || e == ENODEV || e == ENXIO)
                return result_fail(r, strdup_printf("sudo modprobe %s", module),
                                   "%s: %s (kernel module %s not loaded?)", path, strerror(e), module);

        char *fix = strdup_printf("sudo chmod 0666 %s\n"
                                  "# keep it across reboots with a udev rule:\n"
                                  "echo 'KERNEL==\"%s\", MODE=\"0666\", OPTIONS+=\"static_node=%s\"' | sudo tee "
                                  "/etc/udev/rules.d/70-lazaret-%s.rules",
                                  path, udev_name, static_node, udev_name);
        if (stat(path, &st) < 0)
                return result_fail(r, fix, "%s cannot be opened read-write by %s: %s", path, c->who, strerror(e));
        format_owner(st.st_uid, st.st_gid, owner, sizeof owner);
        return result_fail(r, fix, "%s is mode %04o %s; %s cannot open it read-write (%s)", path,
                           (unsigned) (st.st_mode & 07777), owner, c->who, strerror(e));
}

/* Both are misc devices (major 10) with fixed minors; the udev rules are
 * Debian's own defaults, which hosts without udev never apply. */
static int check_dev_fuse(DoctorContext *c, DoctorResult *r) {
        return check_device(c, r, "/dev/fuse", "fuse", 229, "fuse", "fuse");
}

static int check_dev_net_tun(DoctorContext *c, DoctorResult *r) {
        return check_device(c, r, "/dev/net/tun", "tun", 200, "tun", "net/tun");
}

static int read_optional(const char *path, char **ret) {
        int k = read_file_capped(path, SUBID_FILE_MAX, ret, NULL);
        if (k == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        return k;
}

static int check_subid(DoctorContext *c, DoctorResult *r, const char *file, const char *kind, const char *flag) {
        _cleanup_free_ char *subuid = NULL, *subgid = NULL;
        uint64_t count, start;
        unsigned entries;
        int k;

        if (!c->rootless)
                return result_ok(r, "rootful: not needed");

        /* Both files: the other one only helps to pick a range free in both. */
        bool is_uid = streq(file, "/etc/subuid");
        k = read_optional(file, is_uid ? &subuid : &subgid);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return result_fail(r, strdup_printf("sudo chmod 0644 %s", file), "cannot read %s: %s", file,
                                   strerror(-k));
        k = read_optional(is_uid ? "/etc/subgid" : "/etc/subuid", is_uid ? &subgid : &subuid);
        if (k == -ENOMEM)
                return k;

        k = doctor_subid_count(is_uid ? subuid : subgid, c->user, c->uid, &count, &entries);
        if (k < 0)
                return k;
        if (count >= SUBID_NEEDED)
                return result_ok(r, "%s has %" PRIu64 " subordinate %s in %s (%u %s)", c->who, count, kind, file,
                                 entries, entries == 1 ? "entry" : "entries");

        const char *const texts[] = { subuid, subgid };
        k = doctor_subid_free_range(texts, ELEMENTSOF(texts), SUBID_NEEDED, &start);
        if (k == -ENOMEM)
                return k;
        char *fix;
        if (k < 0)
                fix = strdup_printf("# no free range of 65536 ids found in /etc/subuid and /etc/subgid; pick one:\n"
                                    "sudo usermod %s FIRST-LAST %s\npodman system migrate",
                                    flag, c->user_word);
        else
                fix = strdup_printf("sudo usermod %s %" PRIu64 "-%" PRIu64 " %s\npodman system migrate", flag, start,
                                    start + SUBID_NEEDED - 1, c->user_word);
        if (count == 0)
                return result_fail(r, fix,
                                   "%s has no entry for %s (uid %u); rootless Podman needs 65536 subordinate %s", file,
                                   c->who, (unsigned) c->uid, kind);
        return result_fail(r, fix, "%s has only %" PRIu64 " subordinate %s in %s; rootless Podman needs 65536", c->who,
                           count, kind, file);
}

static int check_subuid(DoctorContext *c, DoctorResult *r) {
        return check_subid(c, r, "/etc/subuid", "uids", "--add-subuids");
}

static int check_subgid(DoctorContext *c, DoctorResult *r) {
        return check_subid(c, r, "/etc/subgid", "gids", "--add-subgids");
}

/* newuidmap must be setuid root or carry the capability in its permitted set. */
static int idmap_tool_state(const char *search, const char *name, unsigned cap, char **ret_path, const char **ret_how) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        uint8_t xattr[64];

        int k = exec_find_program(search, name, &path);
        if (k < 0)
                return k;
        if (stat(path, &st) < 0)
                return negative_errno();
        if (st.st_uid == 0 && (st.st_mode & S_ISUID))
                *ret_how = "setuid root";
        else {
                ssize_t n = getxattr(path, "security.capability", xattr, sizeof xattr);
                *ret_how = n > 0 && doctor_file_caps_have(xattr, (size_t) n, cap) ? "file capabilities" : NULL;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

static int check_newuidmap(DoctorContext *c, DoctorResult *r) {
        static const struct {
                const char *name;
                unsigned cap;
        } tools[] = {
                { "newuidmap", CAP_SETUID },
                { "newgidmap", CAP_SETGID },
        };
        _cleanup_free_ char *p0 = NULL, *p1 = NULL;
        char **paths[] = { &p0, &p1 };
        const char *how[2] = {};

        if (!c->rootless)
                return result_ok(r, "rootful: not needed");

        for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
                int k = idmap_tool_state(c->search_path, tools[i].name, tools[i].cap, paths[i], &how[i]);
                if (k == -ENOENT)
                        return result_fail(r, strdup("sudo apt-get install uidmap"),
                                           "%s is not installed (not found in PATH)", tools[i].name);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return result_fail(r, strdup("sudo apt-get install --reinstall uidmap"),
                                           "cannot inspect %s: %s", tools[i].name, strerror(-k));
        }
        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (!how[i]) {
                        _cleanup_free_ char *w = shell_word(*paths[i]);
                        if (!w)
                                return -ENOMEM;
                        return result_fail(
                                r, strdup_printf("sudo chmod u+s %s", w),
                                "%s is neither setuid root nor has file capabilities; rootless Podman cannot map ids",
                                *paths[i]);
                }
        return result_ok(r, "%s (%s), %s (%s)", p0, how[0], p1, how[1]);
}

static void format_rlim(rlim_t v, char buf[static 32]) {
        if (v == RLIM_INFINITY)
                snprintf(buf, 32, "unlimited");
        else
                snprintf(buf, 32, "%llu", (unsigned long long) v);
}

static int check_ulimits(DoctorContext *c, DoctorResult *r) {
        struct rlimit nofile, nproc;
        char f[32], p[32];

        if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || getrlimit(RLIMIT_NPROC, &nproc) < 0)
                return negative_errno();
        format_rlim(nofile.rlim_max, f);
        format_rlim(nproc.rlim_max, p);
        if (nofile.rlim_max < 1024)
                return result_fail(
                        r,
                        strdup_printf("echo '%s hard nofile 65536' | sudo tee /etc/security/limits.d/70-lazaret.conf\n"
                                      "# then log in again",
                                      c->user_word),
                        "hard limit nofile %s is below 1024 (nproc %s)", f, p);
        return result_ok(r, "hard limits nofile %s, nproc %s: lazaret run passes these to Podman as --ulimit", f, p);
}

static int statfs_magic(const char *path, int64_t *ret) {
        struct statfs s;
        if (statfs(path, &s) < 0)
                return negative_errno();
        *ret = (int64_t) s.f_type;
        return 0;
}

static int check_cgroup(DoctorContext *c, DoctorResult *r) {
        int64_t root = 0, unified = 0;
        int k;

        k = statfs_magic("/sys/fs/cgroup", &root);
        if (k < 0)
                return result_fail(r, strdup("sudo mount -t cgroup2 none /sys/fs/cgroup"),
                                   "cannot statfs /sys/fs/cgroup: %s", strerror(-k));
        (void) statfs_magic("/sys/fs/cgroup/unified", &unified);

        const char *podman = c->podman_info_ok && c->podman_info.cgroup_version ? c->podman_info.cgroup_version : NULL;
        DoctorCgroupMode m = doctor_cgroup_mode_from_magic(root, unified);
        switch (m) {
        case DOCTOR_CGROUP_UNIFIED:
                return result_ok(r, "unified (cgroup v2 only)");
        case DOCTOR_CGROUP_HYBRID:
                return result_ok(r,
                                 "hybrid: v1 controllers with a v2 hierarchy at /sys/fs/cgroup/unified%s%s%s; runc and "
                                 "runsc work, crun refuses",
                                 podman ? " (Podman uses " : "", podman ?: "", podman ? ")" : "");
        case DOCTOR_CGROUP_LEGACY:
                return result_fail(r,
                                   strdup("# boot with the unified hierarchy: add systemd.unified_cgroup_hierarchy=1 "
                                          "to GRUB_CMDLINE_LINUX\n"
                                          "sudoedit /etc/default/grub && sudo update-grub && sudo reboot"),
                                   "legacy (cgroup v1 only): runc and runsc work, crun refuses, rootless Podman cannot "
                                   "limit resources");
        case _DOCTOR_CGROUP_MODE_MAX:
        case _DOCTOR_CGROUP_MODE_INVALID:
                break;
        }
        return result_fail(r, strdup("# mount the cgroup2 file system at /sys/fs/cgroup (systemd does this at boot)"),
                           "/sys/fs/cgroup is neither cgroup2 nor a tmpfs of v1 hierarchies (f_type 0x%" PRIx64 ")",
                           (uint64_t) root);
}

/* How each of a profile's ceilings is enforced here (issue 16); never one
 * that nothing enforces. */
static int check_limits(DoctorContext *c, DoctorResult *r) {
        if (!c->rootless)
                return result_ok(r, "pids_limit: gVisor's RLIMIT_NPROC for every task, and a pids cgroup; "
                                    "memory_limit: the coordinator stops the sandbox at it (gVisor's memory file), "
                                    "and a memory cgroup above it; cpu_limit: the CPU affinity of the sandbox's "
                                    "host threads, which run at nice 10; disk_limit: gVisor's overlay of the root "
                                    "file system, and an ext4 image per persistent directory (not the workspace)");
        return result_ok(r,
                         "pids_limit: gVisor's RLIMIT_NPROC for every task (it bounds runsc's host threads too); "
                         "memory_limit: the coordinator stops the sandbox at it (gVisor's memory file); "
                         "cpu_limit: the CPU affinity of the sandbox's host threads, which run at nice 10. "
                         "disk_limit: gVisor's overlay of the root file system, and an ext4 image per persistent "
                         "directory (not the workspace). Rootless runsc runs without cgroups here, so no cgroup stands "
                         "behind them");
}

static int check_storage_driver(DoctorContext *c, DoctorResult *r) {
        int k = podman_probe(c);
        if (k < 0)
                return k;

        if (!c->podman_info_ok)
                return result_fail(r, strdup("# fix the podman check first"),
                                   "unknown: podman info is not available (see the podman check)");

        const char *driver = c->podman_info.graph_driver;
        if (!driver)
                return result_fail(r, strdup("podman info --format '{{.Store.GraphDriverName}}'"),
                                   "podman info does not name its graph driver");
        if (!streq(driver, "vfs"))
                return result_ok(r, "%s", driver);

        /* Where this user's storage.conf is (podman info says), else the default. */
        _cleanup_free_ char *conf = NULL, *conf_word = NULL, *dir_word = NULL;
        if (c->podman_info.storage_conf)
                conf = strdup(c->podman_info.storage_conf);
        else if (c->rootless) {
                const char *home = getenv("HOME");
                conf = home ? path_join(home, ".config/containers/storage.conf") : NULL;
                if (home && !conf)
                        return -ENOMEM;
        } else
                conf = strdup("/etc/containers/storage.conf");
        bool exists = conf && access(conf, F_OK) == 0;
        char *fix;
        if (!conf)
                fix = strdup("# in the [storage] table of ~/.config/containers/storage.conf set\n"
                             "#     driver = \"overlay\"\n"
                             "# then (this deletes the user's Podman containers and images):\n"
                             "podman system reset");
        else {
                conf_word = shell_word(conf);
                _cleanup_free_ char *dir = strdup(conf);
                if (!conf_word || !dir)
                        return -ENOMEM;
                char *slash = strrchr(dir, '/');
                if (slash && slash != dir)
                        *slash = '\0';
                dir_word = shell_word(dir);
                if (!dir_word)
                        return -ENOMEM;
                if (exists)
                        fix = strdup_printf("# in the [storage] table of %s set\n"
                                            "#     driver = \"overlay\"\n"
                                            "# then (this deletes the user's Podman containers and images):\n"
                                            "podman system reset",
                                            conf);
                else
                        fix = strdup_printf("mkdir -p %s && printf '[storage]\\ndriver = \"overlay\"\\n' > %s\n"
                                            "# this deletes the user's Podman containers and images:\n"
                                            "podman system reset",
                                            dir_word, conf_word);
        }
        return result_fail(r, fix,
                           "vfs: every container gets a full copy of its image (slow starts, large disk use)%s%s%s",
                           !conf    ? ""
                           : exists ? "; set in "
                                    : "; there is no ",
                           conf ?: "", conf && !exists ? " asking for overlay" : "");
}

/* A sysctl's value as an integer, or -1 when it is not there. */
static long sysctl_long(const char *path) {
        _cleanup_free_ char *t = NULL;
        if (read_file_capped(path, 64, &t, NULL) < 0)
                return -1;
        char *end;
        long v = strtol(t, &end, 10);
        return end == t ? -1 : v;
}

/* The native backend (issue 42, 45): Landlock's ABI and whether
 * unprivileged user namespaces work (FULL), else why not (FS-ONLY) and the
 * fix, Ubuntu's AppArmor restriction of them among the reasons; and what
 * holds memory_limit there. */
static int check_native(DoctorContext *c, DoctorResult *r) {
        char why[1024] = "";
        NativeMode mode = _NATIVE_MODE_INVALID;
        int abi = 0;
        if (native_probe(NATIVE_MODE_AUTO, &mode, &abi, why, sizeof why) < 0)
                return result_fail(r,
                                   strdup("# Landlock is off in this kernel: add landlock to the lsm= list on the "
                                          "kernel command line\nsudoedit /etc/default/grub && sudo update-grub && sudo "
                                          "reboot"),
                                   "backend = \"native\" cannot run here: %s", why);
        /* What holds memory_limit: the configured cgroup, setup's for the
         * user (found as a run finds it), or nothing, and why. */
        _cleanup_free_ char *cg = NULL, *cg_why = NULL, *memory = NULL;
        if (c->memory_cgroup_configured)
                memory = strdup_printf("memory_limit: the kernel's, in a memory cgroup in %s (runtime.memory_cgroup)",
                                       c->memory_cgroup_configured);
        else {
                int k = config_memory_cgroup_find(c->uid, c->user, &cg, &cg_why);
                if (k < 0)
                        return k;
                memory = k > 0 ? strdup_printf("memory_limit: the kernel's, in a memory cgroup in %s (setup's, "
                                               "found; runtime.memory_cgroup is not set)",
                                               cg)
                               : strdup_printf("memory_limit needs a memory cgroup, and runtime.memory_cgroup is not "
                                               "set and %s; or memory_limit = 0 (no limit)",
                                               cg_why);
        }
        if (!memory)
                return -ENOMEM;
        if (mode == NATIVE_MODE_FULL)
                return result_ok(r, "FULL: Landlock ABI %d, unprivileged user namespaces; %s", abi, memory);
        /* FS-ONLY: say which switch keeps user namespaces from us. */
        StrBuf fix = STRBUF_INIT;
        if (sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
                strbuf_puts(&fix, "# AppArmor restricts unprivileged user namespaces (Ubuntu 24.04 and later): lift "
                                  "it for lazaret-native alone with a profile of its own, or for every program:\n"
                                  "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0\n");
        if (sysctl_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
                strbuf_puts(&fix, "sudo sysctl -w kernel.unprivileged_userns_clone=1\n");
        if (sysctl_long("/proc/sys/user/max_user_namespaces") == 0)
                strbuf_puts(&fix, "sudo sysctl -w user.max_user_namespaces=15000\n");
        if (fix.len == 0)
                strbuf_puts(&fix, "# allow unprivileged user namespaces on this host (see the detail)\n");
        strbuf_puts(&fix, "# or stay with FS-ONLY: Landlock and seccomp alone, which refuses names, escalation and "
                          "volumes, and needs runtime.memory_cgroup");
        char *f = strbuf_steal(&fix);
        return result_fail(r, f, "FS-ONLY (Landlock ABI %d): %s", abi, why);
}

static const DoctorCheck checks[] = {
        { "podman", true, check_podman },
        { "runsc", true, check_runsc },
        { "runsc-network", false, check_runsc_network },
        { "runsc-files", false, check_runsc_files },
        { "runc", true, check_runc },
        { "fuse-overlayfs", true, check_fuse_overlayfs },
        { "fuse2fs", true, check_fuse2fs },
        { "dev-fuse", true, check_dev_fuse },
        { "dev-net-tun", true, check_dev_net_tun },
        { "subuid", true, check_subuid },
        { "subgid", true, check_subgid },
        { "newuidmap", true, check_newuidmap },
        { "slirp4netns", true, check_slirp4netns },
        { "ulimits", true, check_ulimits },
        { "cgroup", false, check_cgroup },
        { "limits", false, check_limits },
        { "storage-driver", false, check_storage_driver },
        { "native", false, check_native },
};

const DoctorCheck *doctor_check_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(checks);
        return checks;
}

DoctorReport *doctor_report_free(DoctorReport *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_results; i++) {
                free(r->results[i].detail);
                free(r->results[i].fix);
        }
        free(r->results);
        free(r->user);
        free(r);
        return NULL;
}

int doctor_run(const DoctorOptions *opts, DoctorReport **ret) {
        _cleanup_(doctor_report_freep) DoctorReport *rep = NULL;
        _cleanup_(context_freep) DoctorContext *c = NULL;
        int k;

        rep = calloc(1, sizeof(DoctorReport));
        if (!rep)
                return -ENOMEM;
        rep->uid = geteuid();
        rep->rootless = rep->uid != 0;
        struct passwd *pw = getpwuid(rep->uid);
        if (pw) {
                rep->user = strdup(pw->pw_name);
                if (!rep->user)
                        return -ENOMEM;
        }
        rep->results = calloc(ELEMENTSOF(checks), sizeof(DoctorResult));
        if (!rep->results)
                return -ENOMEM;

        k = context_new(opts, rep->user, &c);
        if (k < 0)
                return k;

        for (size_t i = 0; i < ELEMENTSOF(checks); i++) {
                if (opts && opts->only) {
                        bool wanted = false;
                        for (const char *const *o = opts->only; *o; o++)
                                wanted = wanted || streq(*o, checks[i].name);
                        if (!wanted)
                                continue;
                }
                DoctorResult *res = &rep->results[rep->n_results++];
                res->name = checks[i].name;
                res->required = checks[i].required;
                log_debug("doctor: check %s", res->name);
                k = checks[i].run(c, res);
                if (k < 0)
                        return log_debug_errno(k, "doctor: check %s could not run", res->name);
                if (!res->detail) /* every check says something */
                        return -EINVAL;
                switch (res->status) {
                case DOCTOR_OK:
                        break;
                case DOCTOR_PROBLEM:
                        rep->n_problems++;
                        break;
                case DOCTOR_WARNING:
                        rep->n_warnings++;
                        break;
                case _DOCTOR_STATUS_MAX:
                case _DOCTOR_STATUS_INVALID:
                        return -EINVAL;
                }
        }
        *ret = TAKE_PTR(rep);
        return 0;
}

/* jansson refuses strings that are not UTF-8; show such bytes as '?' rather
 * than lose the field. */
static json_t *json_string_lossy(const char *s) {
        json_t *j = json_string(s);
        if (j)
                return j;
        _cleanup_free_ char *copy = strdup(s);
        if (!copy)
                return NULL;
        for (char *p = copy; *p; p++)
                if ((unsigned char) *p >= 0x80)
                        *p = '?';
        return json_string(copy);
}

int doctor_report_to_json(const DoctorReport *r, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = json_object(), *list = json_array();
        if (!o || !list)
                return -ENOMEM;

        if (json_object_set_new(o, "user", r->user ? json_string_lossy(r->user) : json_null()) < 0 ||
            json_object_set_new(o, "uid", json_integer((json_int_t) r->uid)) < 0 ||
            json_object_set_new(o, "rootless", json_boolean(r->rootless)) < 0 ||
            json_object_set_new(o, "ok", json_boolean(doctor_report_ok(r))) < 0)
                return -ENOMEM;

        for (size_t i = 0; i < r->n_results; i++) {
                const DoctorResult *res = &r->results[i];
                _cleanup_(json_decrefp) json_t *e = json_object();
                if (!e)
                        return -ENOMEM;
                if (json_object_set_new(e, "name", json_string(res->name)) < 0 ||
                    json_object_set_new(e, "required", json_boolean(res->required)) < 0 ||
                    json_object_set_new(e, "status", json_string(doctor_status_to_string(res->status))) < 0 ||
                    json_object_set_new(e, "detail", json_string_lossy(res->detail ?: "")) < 0 ||
                    json_object_set_new(e, "fix", res->fix ? json_string_lossy(res->fix) : json_null()) < 0 ||
                    json_array_append(list, e) < 0)
                        return -ENOMEM;
        }
        if (json_object_set(o, "checks", list) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}
