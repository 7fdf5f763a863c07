/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret doctor's insides (doctor.h is what its callers see), shared by
 * doctor.c (the table of checks, the runner, the report), doctor-parse.c,
 * doctor-context.c and the checks (doctor-checks-runtime.c,
 * doctor-checks-host.c): the context every check reads and the helpers
 * they call. */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "doctor.h"
#include "exec-util.h"
#include "macro.h"

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

/* doctor-parse.c */
const char *find_line(const char *text, const char *prefix);

/* doctor-context.c */
DoctorContext *context_free(DoctorContext *c);
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
char *shell_word(const char *s);
int result_ok(DoctorResult *r, const char *fmt, ...) _printf_(2, 3);
int result_fail(DoctorResult *r, char *fix, const char *fmt, ...) _printf_(3, 4);
int command_run(const DoctorContext *c, const char *path, const char *const *argv, ExecResult *ret);
char *describe_command_failure(const DoctorContext *c, const char *what, const ExecResult *cmd);
int context_new(const DoctorOptions *opts, const char *user, DoctorContext **ret);
int podman_probe(DoctorContext *c);
int runsc_probe(DoctorContext *c);
const char *format_release(unsigned date, char buf[static 16]);

/* doctor-checks-runtime.c */
int check_podman(DoctorContext *c, DoctorResult *r);
int check_runsc(DoctorContext *c, DoctorResult *r);
int check_runsc_network(DoctorContext *c, DoctorResult *r);
int check_runsc_files(DoctorContext *c, DoctorResult *r);
int check_runc(DoctorContext *c, DoctorResult *r);
int check_fuse_overlayfs(DoctorContext *c, DoctorResult *r);
int check_fuse2fs(DoctorContext *c, DoctorResult *r);
int check_overlay_userns(DoctorContext *c, DoctorResult *r);
int check_slirp4netns(DoctorContext *c, DoctorResult *r);
int check_storage_driver(DoctorContext *c, DoctorResult *r);

/* doctor-checks-host.c */
int check_dev_fuse(DoctorContext *c, DoctorResult *r);
int check_dev_net_tun(DoctorContext *c, DoctorResult *r);
int check_subuid(DoctorContext *c, DoctorResult *r);
int check_subgid(DoctorContext *c, DoctorResult *r);
int check_newuidmap(DoctorContext *c, DoctorResult *r);
int check_ulimits(DoctorContext *c, DoctorResult *r);
int check_cgroup(DoctorContext *c, DoctorResult *r);
int check_limits(DoctorContext *c, DoctorResult *r);
int check_native(DoctorContext *c, DoctorResult *r);

DEFINE_TRIVIAL_CLEANUP_FUNC(DoctorContext *, context_free)
