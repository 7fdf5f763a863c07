/* SPDX-License-Identifier: MIT */
/* lazaret doctor's pure parsers (doctor.h, doctor-internal.h): runsc's
 * release, Podman's version and info, kernel releases, subordinate id
 * files, file capabilities; functions over what was read, which the unit
 * tests feed. No side effects. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-internal.h"
#include "fd-util.h"
#include "string-util.h"

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
const char *find_line(const char *text, const char *prefix) {
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
