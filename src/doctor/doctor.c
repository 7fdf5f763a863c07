/* SPDX-License-Identifier: MIT */
/* lazaret doctor (doctor.h): each check of the host (Podman, its version,
 * storage driver and rootless mode, runsc and its files, runc, subordinate
 * ids and newuidmap, /dev/fuse, fuse-overlayfs (no longer needed), fuse2fs
 * (only to move older layers), /dev/net/tun, slirp4netns, cgroups, limits,
 * overlayfs in a user namespace) as a pure function over what was read,
 * which the unit tests feed, and the runner that reads the host for them.
 * doctor.c holds the table of checks, the runner and the report as JSON;
 * the parsers are doctor-parse.c's, the context and the probes
 * doctor-context.c's, the checks doctor-checks-runtime.c's and
 * doctor-checks-host.c's (doctor-internal.h). */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-internal.h"
#include "fd-util.h"
#include "log.h"
#include "string-util.h"

static const DoctorCheck checks[] = {
        { "podman", true, check_podman },
        { "runsc", true, check_runsc },
        { "runsc-network", false, check_runsc_network },
        { "runsc-files", false, check_runsc_files },
        { "runc", true, check_runc },
        { "fuse-overlayfs", false, check_fuse_overlayfs },
        { "fuse2fs", false, check_fuse2fs },
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
        { "overlay-userns", false, check_overlay_userns },
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
