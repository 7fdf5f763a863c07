/* SPDX-License-Identifier: MIT */
/* Unit tests of lazaret doctor's pure helpers: version parsing, the runsc
 * network decision, /etc/subuid parsing and range choice, file capability
 * decoding, cgroup mode and `podman info` parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/magic.h>

#include "doctor.h"
#include "fd-util.h"
#include "string-util.h"

static void test_status_strings(void **state) {
        (void) state;
        assert_string_equal(doctor_status_to_string(DOCTOR_OK), "ok");
        assert_string_equal(doctor_status_to_string(DOCTOR_PROBLEM), "problem");
        assert_string_equal(doctor_status_to_string(DOCTOR_WARNING), "warning");
        assert_null(doctor_status_to_string(_DOCTOR_STATUS_MAX));
        assert_null(doctor_status_to_string(_DOCTOR_STATUS_INVALID));
}

static void test_runsc_release(void **state) {
        unsigned date = 0;
        char *v = NULL;
        (void) state;

        /* Debian bookworm's package, as this host prints it. */
        assert_int_equal(doctor_parse_runsc_release("runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", &date, &v), 0);
        assert_int_equal(date, 20221219);
        assert_string_equal(v, "0.0~20221219.0");
        v = mfree(v);

        /* Upstream releases. */
        assert_int_equal(doctor_parse_runsc_release("runsc version release-20240807.0\nspec: 1.1.0-rc.1\n", &date, &v),
                         0);
        assert_int_equal(date, 20240807);
        assert_string_equal(v, "release-20240807.0");
        v = mfree(v);
        assert_int_equal(doctor_parse_runsc_release("runsc version release-20250106.0", &date, NULL), 0);
        assert_int_equal(date, 20250106);
        /* Debian trixie. */
        assert_int_equal(doctor_parse_runsc_release("runsc version 0.0~20240729.0-1\n", &date, NULL), 0);
        assert_int_equal(date, 20240729);
        /* The version line need not be first. */
        assert_int_equal(doctor_parse_runsc_release("warning: x\nrunsc version release-20241001.0\n", &date, NULL), 0);
        assert_int_equal(date, 20241001);

        /* No date in the version word: the output is understood, the date is not. */
        date = 7;
        assert_int_equal(doctor_parse_runsc_release("runsc version VERSION_MISSING\n", &date, &v), -ENODATA);
        assert_int_equal(date, 7);
        assert_null(v);
        assert_int_equal(doctor_parse_runsc_release("runsc version release-2024080.0\n", &date, NULL), -ENODATA);
        assert_int_equal(doctor_parse_runsc_release("runsc version 123456789\n", &date, NULL), -ENODATA);
        /* Eight digits that are no date. */
        assert_int_equal(doctor_parse_runsc_release("runsc version 0.0~20241399.0\n", &date, NULL), -ENODATA);
        /* A date elsewhere on the line does not count: only the version word. */
        assert_int_equal(doctor_parse_runsc_release("runsc version dev 20240807\n", &date, NULL), -ENODATA);

        /* Not runsc's output at all. */
        assert_int_equal(doctor_parse_runsc_release("", &date, NULL), -EINVAL);
        assert_int_equal(doctor_parse_runsc_release("gvisor 20240807\n", &date, NULL), -EINVAL);
        assert_int_equal(doctor_parse_runsc_release("runsc version \n", &date, NULL), -EINVAL);
        assert_int_equal(doctor_parse_runsc_release(NULL, &date, NULL), -EINVAL);
}

static void test_podman_version(void **state) {
        unsigned v[3] = { 9, 9, 9 };
        (void) state;

        assert_int_equal(doctor_parse_podman_version("podman version 4.3.1\n", v), 0);
        assert_int_equal(v[0], 4);
        assert_int_equal(v[1], 3);
        assert_int_equal(v[2], 1);
        assert_int_equal(doctor_parse_podman_version("podman version 5.0.0-dev\n", v), 0);
        assert_int_equal(v[0], 5);
        assert_int_equal(v[2], 0);
        assert_int_equal(doctor_parse_podman_version("podman version 4.9\n", v), 0);
        assert_int_equal(v[1], 9);
        assert_int_equal(v[2], 0);
        assert_int_equal(doctor_parse_podman_version("podman version 4.10.12+ds1\n", v), 0);
        assert_int_equal(v[1], 10);
        assert_int_equal(v[2], 12);

        v[0] = 77;
        assert_int_equal(doctor_parse_podman_version("podman version 4\n", v), -EINVAL);
        assert_int_equal(v[0], 77);
        assert_int_equal(doctor_parse_podman_version("podman version x.y\n", v), -EINVAL);
        assert_int_equal(doctor_parse_podman_version("docker version 4.3.1\n", v), -EINVAL);
        assert_int_equal(doctor_parse_podman_version("podman version 1234567890.1\n", v), -EINVAL);
        assert_int_equal(doctor_parse_podman_version("", v), -EINVAL);

        static const unsigned min[3] = { 4, 3, 0 };
        unsigned a[3] = { 4, 3, 1 }, b[3] = { 4, 2, 99 }, c[3] = { 4, 3, 0 }, d[3] = { 5, 0, 0 }, e[3] = { 3, 99, 99 };
        assert_true(doctor_version_compare(a, min) > 0);
        assert_true(doctor_version_compare(b, min) < 0);
        assert_true(doctor_version_compare(c, min) == 0);
        assert_true(doctor_version_compare(d, min) > 0);
        assert_true(doctor_version_compare(e, min) < 0);
}

static void test_kernel_release(void **state) {
        unsigned major = 0, minor = 0;
        (void) state;

        assert_int_equal(doctor_parse_kernel_release("6.18.44-fc-v669", &major, &minor), 0);
        assert_int_equal(major, 6);
        assert_int_equal(minor, 18);
        assert_int_equal(doctor_parse_kernel_release("6.1.0-28-amd64", &major, &minor), 0);
        assert_int_equal(minor, 1);
        assert_int_equal(doctor_parse_kernel_release("5.10", &major, &minor), 0);
        assert_int_equal(major, 5);
        assert_int_equal(doctor_parse_kernel_release("6", &major, &minor), -EINVAL);
        assert_int_equal(doctor_parse_kernel_release("linux", &major, &minor), -EINVAL);
        assert_int_equal(doctor_parse_kernel_release("6.x", &major, &minor), -EINVAL);
}

static void test_runsc_network_decision(void **state) {
        (void) state;
        /* Old runsc on a 6.11+ kernel: the host's situation. */
        assert_false(doctor_runsc_sandbox_network_works(20221219, 1));
        assert_false(doctor_runsc_sandbox_network_works(20240729, 1));
        /* The first fixed release and later. */
        assert_true(doctor_runsc_sandbox_network_works(20240807, 1));
        assert_true(doctor_runsc_sandbox_network_works(20250106, 1));
        /* Older kernels: any runsc. */
        assert_true(doctor_runsc_sandbox_network_works(20221219, 0));
        assert_true(doctor_runsc_sandbox_network_works(0, 0));
        /* Unknowns count against it. */
        assert_false(doctor_runsc_sandbox_network_works(0, 1));
        assert_false(doctor_runsc_sandbox_network_works(20221219, -1));
        assert_true(doctor_runsc_sandbox_network_works(20240807, -1));
}

static void test_subid_count(void **state) {
        uint64_t count = 99;
        unsigned entries = 99;
        (void) state;

        static const char text[] = "alice:100000:65536\n"
                                   "lazaret-test:165536:65536\n"
                                   "1001:231072:1000\n"
                                   "bob:300000:65536\r\n"
                                   "# not a comment in shadow's format, just a bad line\n"
                                   "broken:12:\n"
                                   "broken:x:5\n"
                                   "broken:5:0\n"
                                   ":5:5\n"
                                   "toolong:99999999999:5\n"
                                   "carol:400000:65536 \n"
                                   "alice:500000:10";

        /* By name and by uid, summed. */
        assert_int_equal(doctor_subid_count(text, "lazaret-test", 1001, &count, &entries), 0);
        assert_int_equal(count, 66536);
        assert_int_equal(entries, 2);
        /* By name only, two lines (the last without a newline). */
        assert_int_equal(doctor_subid_count(text, "alice", 1000, &count, &entries), 0);
        assert_int_equal(count, 65546);
        assert_int_equal(entries, 2);
        /* CR and trailing blanks tolerated. */
        assert_int_equal(doctor_subid_count(text, "bob", 1002, &count, NULL), 0);
        assert_int_equal(count, 65536);
        assert_int_equal(doctor_subid_count(text, "carol", 1003, &count, NULL), 0);
        assert_int_equal(count, 65536);
        /* Malformed lines never count. */
        assert_int_equal(doctor_subid_count(text, "broken", 1004, &count, &entries), 0);
        assert_int_equal(count, 0);
        assert_int_equal(entries, 0);
        assert_int_equal(doctor_subid_count(text, "toolong", 1005, &count, NULL), 0);
        assert_int_equal(count, 0);
        /* A prefix of a name is not the name. */
        assert_int_equal(doctor_subid_count(text, "lazaret", 4242, &count, NULL), 0);
        assert_int_equal(count, 0);
        /* No user name (no passwd entry): the uid alone. */
        assert_int_equal(doctor_subid_count(text, NULL, 1001, &count, NULL), 0);
        assert_int_equal(count, 1000);
        /* No file, empty file. */
        assert_int_equal(doctor_subid_count(NULL, "alice", 1000, &count, NULL), 0);
        assert_int_equal(count, 0);
        assert_int_equal(doctor_subid_count("", "alice", 1000, &count, NULL), 0);
        assert_int_equal(count, 0);
}

static void test_subid_free_range(void **state) {
        uint64_t start = 0;
        (void) state;

        /* Empty files: shadow's default first range. */
        const char *none[] = { NULL, "" };
        assert_int_equal(doctor_subid_free_range(none, 2, 65536, &start), 0);
        assert_int_equal(start, 100000);

        /* Taken in one file only still blocks it for both. */
        const char *one[] = { "alice:100000:65536\n", NULL };
        assert_int_equal(doctor_subid_free_range(one, 2, 65536, &start), 0);
        assert_int_equal(start, 165536);

        /* A gap too small is skipped; unsorted input; overlapping entries. */
        const char *gaps[] = { "c:300000:65536\na:100000:65536\n", "b:165536:1000\nd:166000:100000\n" };
        assert_int_equal(doctor_subid_free_range(gaps, 2, 65536, &start), 0);
        assert_int_equal(start, 365536);

        /* A gap large enough is used. */
        const char *fits[] = { "a:100000:65536\nb:300000:65536\n" };
        assert_int_equal(doctor_subid_free_range(fits, 1, 65536, &start), 0);
        assert_int_equal(start, 165536);

        /* Ranges below 100000 do not matter. */
        const char *low[] = { "a:0:1000\nb:1000:98000\n" };
        assert_int_equal(doctor_subid_free_range(low, 1, 65536, &start), 0);
        assert_int_equal(start, 100000);

        /* Straddling 100000. */
        const char *straddle[] = { "a:90000:20000\n" };
        assert_int_equal(doctor_subid_free_range(straddle, 1, 65536, &start), 0);
        assert_int_equal(start, 110000);

        /* Nothing left below 2^32-1. */
        const char *full[] = { "a:100000:4294867295\n" };
        assert_int_equal(doctor_subid_free_range(full, 1, 65536, &start), -ENOSPC);
        const char *edge[] = { "a:100000:4294801758\n" }; /* ends at 4294901758: 65536 ids still fit */
        assert_int_equal(doctor_subid_free_range(edge, 1, 65536, &start), 0);
        assert_int_equal(start, UINT64_C(4294901758));
        assert_int_equal(start + 65536 - 1, UINT64_C(4294967293));
        const char *edge2[] = { "a:100000:4294801760\n" };
        assert_int_equal(doctor_subid_free_range(edge2, 1, 65536, &start), -ENOSPC);

        assert_int_equal(doctor_subid_free_range(none, 2, 0, &start), -EINVAL);
}

static void put_le32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
}

static void test_file_caps(void **state) {
        uint8_t x[24] = {};
        (void) state;

        /* Revision 2 with cap_setuid (7) permitted: what setcap cap_setuid+ep writes. */
        put_le32(x, 0x02000000 | 1);
        put_le32(x + 4, 1u << 7);
        assert_true(doctor_file_caps_have(x, 20, 7));
        assert_false(doctor_file_caps_have(x, 20, 6));
        /* Only inheritable: not enough. */
        put_le32(x + 4, 0);
        put_le32(x + 8, 1u << 6);
        assert_false(doctor_file_caps_have(x, 20, 6));
        /* High word (cap 40). */
        put_le32(x + 12, 1u << 8);
        assert_true(doctor_file_caps_have(x, 20, 40));
        /* Truncated. */
        assert_false(doctor_file_caps_have(x, 19, 40));
        assert_false(doctor_file_caps_have(x, 3, 7));
        /* Revision 3 (namespaced root id) needs 24 bytes. */
        put_le32(x, 0x03000000);
        put_le32(x + 4, 1u << 6);
        assert_true(doctor_file_caps_have(x, 24, 6));
        assert_false(doctor_file_caps_have(x, 20, 6));
        /* Revision 1: one word only. */
        put_le32(x, 0x01000000);
        assert_true(doctor_file_caps_have(x, 12, 6));
        assert_false(doctor_file_caps_have(x, 12, 40));
        /* Unknown revision. */
        put_le32(x, 0x04000000);
        assert_false(doctor_file_caps_have(x, 24, 6));
        assert_false(doctor_file_caps_have(NULL, 24, 6));
}

static void test_cgroup_mode(void **state) {
        (void) state;
        assert_int_equal(doctor_cgroup_mode_from_magic(CGROUP2_SUPER_MAGIC, 0), DOCTOR_CGROUP_UNIFIED);
        /* This host: tmpfs of v1 hierarchies with cgroup2 at unified/. */
        assert_int_equal(doctor_cgroup_mode_from_magic(TMPFS_MAGIC, CGROUP2_SUPER_MAGIC), DOCTOR_CGROUP_HYBRID);
        assert_int_equal(doctor_cgroup_mode_from_magic(TMPFS_MAGIC, 0), DOCTOR_CGROUP_LEGACY);
        /* unified/ as a plain directory on the tmpfs: still legacy. */
        assert_int_equal(doctor_cgroup_mode_from_magic(TMPFS_MAGIC, TMPFS_MAGIC), DOCTOR_CGROUP_LEGACY);
        assert_int_equal(doctor_cgroup_mode_from_magic(EXT4_SUPER_MAGIC, 0), _DOCTOR_CGROUP_MODE_INVALID);
        assert_int_equal(doctor_cgroup_mode_from_magic(0, CGROUP2_SUPER_MAGIC), _DOCTOR_CGROUP_MODE_INVALID);
        assert_string_equal(doctor_cgroup_mode_to_string(DOCTOR_CGROUP_HYBRID), "hybrid");
        assert_string_equal(doctor_cgroup_mode_to_string(DOCTOR_CGROUP_UNIFIED), "unified");
        assert_string_equal(doctor_cgroup_mode_to_string(DOCTOR_CGROUP_LEGACY), "legacy");
        assert_null(doctor_cgroup_mode_to_string(_DOCTOR_CGROUP_MODE_INVALID));
}

static void test_podman_info(void **state) {
        DoctorPodmanInfo i = { .rootless = -1 };
        (void) state;

        /* Trimmed from this host's rootless `podman info --format json`. */
        static const char json[] =
                "{\"host\": {\"arch\": \"amd64\", \"cgroupManager\": \"cgroupfs\", \"cgroupVersion\": \"v1\","
                " \"ociRuntime\": {\"name\": \"runc\", \"path\": \"/usr/bin/runc\"},"
                " \"security\": {\"rootless\": true, \"seccompEnabled\": true}},"
                " \"store\": {\"configFile\": \"/home/lazaret-test/.config/containers/storage.conf\","
                " \"graphDriverName\": \"vfs\"},"
                " \"version\": {\"APIVersion\": \"4.3.1\", \"Version\": \"4.3.1\"}}";
        assert_int_equal(doctor_parse_podman_info(json, strlen(json), &i), 0);
        assert_string_equal(i.cgroup_version, "v1");
        assert_string_equal(i.graph_driver, "vfs");
        assert_string_equal(i.oci_runtime, "runc");
        assert_string_equal(i.storage_conf, "/home/lazaret-test/.config/containers/storage.conf");
        assert_string_equal(i.version, "4.3.1");
        assert_int_equal(i.rootless, 1);
        doctor_podman_info_done(&i);
        assert_null(i.graph_driver);
        assert_int_equal(i.rootless, -1);

        /* Missing fields stay unset; wrong types are ignored. */
        static const char sparse[] = "{\"store\": {\"graphDriverName\": \"overlay\"}, \"host\": {\"cgroupVersion\": 2,"
                                     " \"security\": {\"rootless\": \"yes\"}}}";
        assert_int_equal(doctor_parse_podman_info(sparse, strlen(sparse), &i), 0);
        assert_string_equal(i.graph_driver, "overlay");
        assert_null(i.cgroup_version);
        assert_null(i.oci_runtime);
        assert_int_equal(i.rootless, -1);
        doctor_podman_info_done(&i);

        /* Not podman info. */
        static const char *const bad[] = { "", "[]", "{}", "{\"host\": 1}", "{\"host\": {}", "null", "\"x\"" };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                i.graph_driver = (char *) "untouched";
                assert_int_equal(doctor_parse_podman_info(bad[k], strlen(bad[k]), &i), -EINVAL);
                assert_string_equal(i.graph_driver, "untouched");
        }
        i.graph_driver = NULL;
}

static void test_check_table(void **state) {
        size_t n = 0;
        const DoctorCheck *t = doctor_check_table(&n);
        (void) state;

        /* The names are an interface (JSON); keep them and their order. */
        static const struct {
                const char *name;
                bool required;
        } want[] = {
                { "podman", true },
                { "runsc", true },
                { "runsc-network", false },
                { "runsc-files", false },
                { "runc", true },
                { "fuse-overlayfs", false },
                { "fuse2fs", false },
                { "dev-fuse", true },
                { "dev-net-tun", true },
                { "subuid", true },
                { "subgid", true },
                { "newuidmap", true },
                { "slirp4netns", true },
                { "ulimits", true },
                { "cgroup", false },
                { "limits", false },
                { "storage-driver", false },
                { "native", false },
                { "overlay-userns", false },
        };
        assert_int_equal(n, ELEMENTSOF(want));
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(t[i].name, want[i].name);
                assert_int_equal(t[i].required, want[i].required);
                assert_non_null(t[i].run);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_strings),
                cmocka_unit_test(test_runsc_release),
                cmocka_unit_test(test_podman_version),
                cmocka_unit_test(test_kernel_release),
                cmocka_unit_test(test_runsc_network_decision),
                cmocka_unit_test(test_subid_count),
                cmocka_unit_test(test_subid_free_range),
                cmocka_unit_test(test_file_caps),
                cmocka_unit_test(test_cgroup_mode),
                cmocka_unit_test(test_podman_info),
                cmocka_unit_test(test_check_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
