/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret doctor: the prerequisites of a sandbox launch, checked on this host
 * for the user running the check (rootless when the effective uid is not 0).
 *
 * The checks live in a table (doctor_check_table()); each one fills a
 * DoctorResult. The parsing and decision helpers below are pure (no I/O) so
 * the unit tests can feed them text; everything with side effects (running
 * tools, opening devices, unsharing namespaces) stays in doctor.c.
 *
 * Nothing here prints or exits: doctor_run() returns a report that the verb
 * renders as text or JSON. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

typedef enum DoctorStatus {
        DOCTOR_OK,
        DOCTOR_PROBLEM, /* a required check failed */
        DOCTOR_WARNING, /* a check that is not required failed */
        _DOCTOR_STATUS_MAX,
        _DOCTOR_STATUS_INVALID = -EINVAL,
} DoctorStatus;

/* "ok", "problem", "warning" (the JSON spelling); NULL when out of range. */
const char *doctor_status_to_string(DoctorStatus s);

typedef struct DoctorResult {
        const char *name; /* static, from the check table */
        bool required;
        DoctorStatus status;
        char *detail; /* one line; never NULL once the check ran */
        char *fix; /* shell lines to paste, separated by '\n' ("# ..." lines
                    * are explanations); NULL when status is DOCTOR_OK */
} DoctorResult;

typedef struct DoctorOptions {
        uint64_t timeout_usec; /* limit for each external command; 0: DOCTOR_TIMEOUT_USEC_DEFAULT */
        const char *path; /* where tools are looked up; NULL: $PATH, or a default when unset */
        const char *const *only; /* NULL-terminated check names to run (in table order); NULL: all */
        const char *runsc; /* the runsc to check ([runtime] runsc); NULL: the one on the path */
        const char *memory_cgroup; /* [runtime] memory_cgroup; NULL: setup's for the user, looked for */
} DoctorOptions;

#define DOCTOR_TIMEOUT_USEC_DEFAULT (UINT64_C(30) * 1000000)

typedef struct DoctorReport {
        char *user; /* login name, NULL when the uid has no passwd entry */
        uid_t uid;
        bool rootless;
        DoctorResult *results; /* one per check run, in table order */
        size_t n_results;
        unsigned n_problems; /* required checks that failed */
        unsigned n_warnings;
} DoctorReport;

typedef struct DoctorContext DoctorContext;

typedef struct DoctorCheck {
        const char *name; /* stable: it appears in the JSON output */
        bool required;
        /* Fill r->status, r->detail and r->fix. A failed check is not an
         * error: it returns 0 with the status set. Returns -ENOMEM (or another
         * -errno) only when the check itself could not be carried out. */
        int (*run)(DoctorContext *c, DoctorResult *r);
} DoctorCheck;

/* The checks, in the order they run and are shown. Static storage. */
const DoctorCheck *doctor_check_table(size_t *ret_n);

/* Run every check. Returns 0 and a report to free with
 * doctor_report_free(), or -ENOMEM / -errno when doctor itself failed (not
 * when a check failed: that is in the report). */
int doctor_run(const DoctorOptions *opts, DoctorReport **ret);

DoctorReport *doctor_report_free(DoctorReport *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(DoctorReport *, doctor_report_free)

/* True when every required check passed. */
static inline bool doctor_report_ok(const DoctorReport *r) {
        return r->n_problems == 0;
}

/* {"user", "uid", "rootless", "ok", "checks": [{"name", "required",
 * "status", "detail", "fix"}]}; "fix" is null for passed checks. Returns 0
 * and a new reference, or -ENOMEM. */
int doctor_report_to_json(const DoctorReport *r, json_t **ret);

/* ---- pure helpers (no I/O; unit-tested) ---- */

/* runsc releases before this one refuse --network=sandbox on kernels that
 * show net.core.rmem_default in every network namespace (Linux 6.11+). */
#define DOCTOR_RUNSC_NETWORK_FIXED_RELEASE 20240807u

/* Parse `runsc --version` output ("runsc version release-20240807.0",
 * Debian's "runsc version 0.0~20221219.0"). Stores the release date as
 * YYYYMMDD in *ret_date and, if ret_version is not NULL, a copy of the
 * version word (caller frees). Returns 0; -EINVAL when there is no
 * "runsc version" line; -ENODATA when the version carries no plausible date;
 * -ENOMEM. Outputs are written only on success. */
int doctor_parse_runsc_release(const char *output, unsigned *ret_date, char **ret_version);

/* Parse "podman version 4.3.1" (also "5.0.0-dev", "4.9"; a missing patch
 * level is 0) into ret[0..2]. Returns 0 or -EINVAL. */
int doctor_parse_podman_version(const char *output, unsigned ret[3]);

/* Compare dotted versions: <0, 0, >0. */
int doctor_version_compare(const unsigned a[3], const unsigned b[3]);

/* Parse a kernel release ("6.18.44-fc-v669") into major and minor.
 * Returns 0 or -EINVAL. */
int doctor_parse_kernel_release(const char *release, unsigned *ret_major, unsigned *ret_minor);

/* True when runsc of that release (YYYYMMDD, 0 = unknown) can start with its
 * own network stack: rmem_visible says whether net.core.rmem_default is
 * visible in a fresh network namespace (1 yes, 0 no, <0 unknown). An unknown
 * on either side counts against it. */
bool doctor_runsc_sandbox_network_works(unsigned release, int rmem_visible);

/* Sum the sizes of the /etc/subuid (or /etc/subgid) entries that belong to
 * user (by name) or uid (by decimal id). Malformed lines are skipped, as
 * shadow's own readers skip them. text may be NULL (no file): the count is 0.
 * Returns 0 and writes *ret_count, *ret_entries (may be NULL). */
int doctor_subid_count(const char *text, const char *user, uid_t uid, uint64_t *ret_count, unsigned *ret_entries);

/* The lowest start >= 100000 of a range of count ids that overlaps no entry
 * (of any owner) in any of the n given files (NULL entries are skipped), so
 * that one range can be added to both /etc/subuid and /etc/subgid. Returns 0,
 * -ENOSPC when no such range fits below 2^32-1, -EINVAL, or -ENOMEM. */
int doctor_subid_free_range(const char *const *texts, size_t n, uint64_t count, uint64_t *ret_start);

/* True when a security.capability xattr value grants cap in its permitted
 * set (revisions 1, 2 and 3 of struct vfs_cap_data). */
bool doctor_file_caps_have(const void *xattr, size_t size, unsigned cap);

typedef enum DoctorCgroupMode {
        DOCTOR_CGROUP_UNIFIED, /* cgroup v2 only */
        DOCTOR_CGROUP_HYBRID, /* v1 controllers with a v2 hierarchy at /sys/fs/cgroup/unified */
        DOCTOR_CGROUP_LEGACY, /* v1 only */
        _DOCTOR_CGROUP_MODE_MAX,
        _DOCTOR_CGROUP_MODE_INVALID = -EINVAL,
} DoctorCgroupMode;

const char *doctor_cgroup_mode_to_string(DoctorCgroupMode m);

/* Decide the mode from statfs f_type of /sys/fs/cgroup and of
 * /sys/fs/cgroup/unified (0 when that does not exist). Returns
 * _DOCTOR_CGROUP_MODE_INVALID when /sys/fs/cgroup is neither cgroup2 nor a
 * tmpfs of v1 hierarchies. */
DoctorCgroupMode doctor_cgroup_mode_from_magic(int64_t root_magic, int64_t unified_magic);

typedef struct DoctorPodmanInfo {
        char *version; /* version.Version */
        char *cgroup_version; /* host.cgroupVersion: "v1" / "v2" */
        char *graph_driver; /* store.graphDriverName: "overlay", "vfs", ... */
        char *oci_runtime; /* host.ociRuntime.name */
        char *storage_conf; /* store.configFile */
        int rootless; /* host.security.rootless: 1, 0, or -1 when absent */
} DoctorPodmanInfo;

/* Parse `podman info --format json`. Absent fields stay NULL; the document
 * must be an object with a "host" or "store" object. Returns 0, -EINVAL, or
 * -ENOMEM. On failure *ret is untouched. */
int doctor_parse_podman_info(const char *json, size_t size, DoctorPodmanInfo *ret);
void doctor_podman_info_done(DoctorPodmanInfo *i);
