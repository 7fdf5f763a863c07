/* SPDX-License-Identifier: MIT */
/* Unit tests of src/native/landlock: each case forks a child that first
 * checks the thing is possible unrestricted (so a denial is Landlock's), then
 * restricts itself and tries again, and reports every outcome (0 or -errno)
 * through a pipe. Cases that need Landlock, or a given ABI, are skipped on a
 * kernel without it; the ABI hook and the refusals are tested everywhere. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd-util.h"
#include "landlock.h"
#include "macro.h"

#define MAX_RESULTS 16

/* What a child reports: one slot per attempt, and a status for the
 * restriction itself. */
typedef struct Report {
        int apply; /* landlock_apply's return */
        char why[200];
        int n;
        int results[MAX_RESULTS];
} Report;

typedef struct Case {
        const LandlockRules *rules;
        int min_abi;
        /* Attempts run before (phase 0) and after (phase 1) landlock_apply;
         * each writes its outcomes to rep->results. */
        void (*attempt)(const struct Case *c, int phase, Report *rep);
        const char *dir;
        const char *abstract_name;
        uint16_t tcp_port;
} Case;

static int errno_of(int r) {
        return r < 0 ? -errno : 0;
}

/* Fork; the child runs c->attempt unrestricted, then applies c->rules, then
 * runs it again. *before and *after receive the two reports. */
static void run_case(const Case *c, Report *before, Report *after) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                Report rep[2];
                const char *why = NULL;
                memset(rep, 0, sizeof(rep));
                close(p[0]);
                c->attempt(c, 0, &rep[0]);
                rep[1].apply = landlock_apply(c->rules, c->min_abi, &why);
                if (why)
                        snprintf(rep[1].why, sizeof(rep[1].why), "%s", why);
                /* Also after a refusal: it must have left nothing applied. */
                c->attempt(c, 1, &rep[1]);
                (void) !write(p[1], rep, sizeof(rep));
                _exit(0);
        }
        close(p[1]);
        Report rep[2];
        ssize_t k = read(p[0], rep, sizeof(rep));
        close(p[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(k, (ssize_t) sizeof(rep));
        *before = rep[0];
        *after = rep[1];
}

static int real_abi(void) {
        char *saved = getenv(LANDLOCK_TEST_ABI_ENV);
        assert_null(saved);
        return landlock_abi();
}

#define SKIP_UNLESS_ABI(n)                                                                                             \
        do {                                                                                                           \
                int _abi = real_abi();                                                                                 \
                if (_abi < (n)) {                                                                                      \
                        print_message("skipped: needs Landlock ABI %d, kernel has %d\n", (n), _abi);                   \
                        skip();                                                                                        \
                }                                                                                                      \
        } while (0)

/* A scratch tree: rw/, ro/ (with ro/file), out/ (with out/file), and
 * link -> rw, in a fresh directory under /tmp. */
static char *make_tree(void) {
        char *d = strdup("/tmp/lazaret-test-landlock-XXXXXX");
        char p[PATH_MAX];
        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        const char *dirs[] = { "rw", "ro", "out" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", d, dirs[i]);
                assert_int_equal(mkdir(p, 0700), 0);
        }
        const char *files[] = { "ro/file", "out/file", "rw/file" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(p, sizeof(p), "%s/%s", d, files[i]);
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
                assert_int_equal(write(fd, "data\n", 5), 5);
                close(fd);
        }
        snprintf(p, sizeof(p), "%s/link", d);
        assert_int_equal(symlink("rw", p), 0);
        return d;
}

static void remove_tree(char *d) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
        assert_int_equal(system(cmd), 0);
        free(d);
}

static LandlockRules *rules_for(const char *d, unsigned flags) {
        LandlockRules *r = NULL;
        char p[PATH_MAX], *err = NULL;
        assert_int_equal(landlock_rules_new(flags, &r), 0);
        snprintf(p, sizeof(p), "%s/rw", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_WRITE, &err), 0);
        assert_null(err);
        snprintf(p, sizeof(p), "%s/ro", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_ONLY, &err), 0);
        assert_null(err);
        return r;
}

static int try_open(const char *dir, const char *name, int flags) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        int fd = open(p, flags | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static int try_write(const char *dir, const char *name) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = write(fd, "x", 1) == 1 ? 0 : -EIO;
        close(fd);
        return r;
}

static int try_truncate(const char *dir, const char *name) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return errno_of(truncate(p, 0));
}

enum {
        FS_RW_CREATE,
        FS_RW_READ,
        FS_RO_READ,
        FS_RO_LIST,
        FS_RO_WRITE,
        FS_RO_CREATE,
        FS_RO_TRUNCATE,
        FS_OUT_READ,
        FS_OUT_WRITE,
        FS_TMP_CREATE,
        _FS_MAX,
};

static void attempt_fs(const Case *c, int phase, Report *rep) {
        char name[32];
        snprintf(name, sizeof(name), "new%d", phase);
        rep->results[FS_RW_CREATE] = try_write(c->dir, phase ? "rw/new1" : "rw/new0");
        rep->results[FS_RW_READ] = try_open(c->dir, "rw/file", O_RDONLY);
        rep->results[FS_RO_READ] = try_open(c->dir, "ro/file", O_RDONLY);
        rep->results[FS_RO_LIST] = try_open(c->dir, "ro", O_RDONLY | O_DIRECTORY);
        rep->results[FS_RO_WRITE] = try_open(c->dir, "ro/file", O_WRONLY);
        rep->results[FS_RO_CREATE] = try_write(c->dir, phase ? "ro/new1" : "ro/new0");
        /* Truncating empties the file: only the restricted attempt may. */
        rep->results[FS_RO_TRUNCATE] = phase ? try_truncate(c->dir, "ro/file") : 0;
        rep->results[FS_OUT_READ] = try_open(c->dir, "out/file", O_RDONLY);
        rep->results[FS_OUT_WRITE] = try_open(c->dir, "out/file", O_WRONLY);
        rep->results[FS_TMP_CREATE] = try_write(c->dir, name);
        rep->n = _FS_MAX;
}

static void test_files(void **state) {
        (void) state;
        SKIP_UNLESS_ABI(1);
        char *d = make_tree();
        _cleanup_(landlock_rules_freep) LandlockRules *r = rules_for(d, 0);
        assert_int_equal(landlock_rules_count(r), 2);
        Case c = { .rules = r, .attempt = attempt_fs, .dir = d };
        Report before, after;
        run_case(&c, &before, &after);

        for (int i = 0; i < _FS_MAX; i++)
                assert_int_equal(before.results[i], 0);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[FS_RW_CREATE], 0);
        assert_int_equal(after.results[FS_RW_READ], 0);
        assert_int_equal(after.results[FS_RO_READ], 0);
        assert_int_equal(after.results[FS_RO_LIST], 0);
        assert_int_equal(after.results[FS_RO_WRITE], -EACCES);
        assert_int_equal(after.results[FS_RO_CREATE], -EACCES);
        if (real_abi() >= 3)
                assert_int_equal(after.results[FS_RO_TRUNCATE], -EACCES);
        assert_int_equal(after.results[FS_OUT_READ], -EACCES);
        assert_int_equal(after.results[FS_OUT_WRITE], -EACCES);
        /* The scratch directory itself is in no rule. */
        assert_int_equal(after.results[FS_TMP_CREATE], -EACCES);

        /* What the child was refused did not happen behind its back. */
        struct stat st;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/rw/new1", d);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_size, 1);
        snprintf(p, sizeof(p), "%s/ro/new1", d);
        assert_int_equal(stat(p, &st), -1);
        snprintf(p, sizeof(p), "%s/ro/file", d);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_size, 5);
        remove_tree(d);
}

/* A rule on a single file grants the file rights only, and nothing of its
 * directory's other entries. */
static void attempt_single_file(const Case *c, int phase, Report *rep) {
        (void) phase;
        rep->results[0] = try_write(c->dir, "out/file");
        rep->results[1] = try_open(c->dir, "out/other", O_WRONLY | O_CREAT);
        rep->n = 2;
}

static void test_single_file_rule(void **state) {
        (void) state;
        SKIP_UNLESS_ABI(1);
        char *d = make_tree();
        char p[PATH_MAX], *err = NULL;
        _cleanup_(landlock_rules_freep) LandlockRules *r = NULL;
        assert_int_equal(landlock_rules_new(0, &r), 0);
        snprintf(p, sizeof(p), "%s/out/file", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_WRITE, &err), 0);
        Case c = { .rules = r, .attempt = attempt_single_file, .dir = d };
        Report before, after;
        run_case(&c, &before, &after);
        assert_int_equal(before.results[0], 0);
        assert_int_equal(before.results[1], 0);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[0], 0);
        assert_int_equal(after.results[1], -EACCES);
        remove_tree(d);
}

static void test_refused_paths(void **state) {
        (void) state;
        char *d = make_tree();
        char p[PATH_MAX], *err = NULL;
        _cleanup_(landlock_rules_freep) LandlockRules *r = NULL;
        assert_int_equal(landlock_rules_new(0, &r), 0);

        /* The last component a symbolic link. */
        snprintf(p, sizeof(p), "%s/link", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_WRITE, &err), -ELOOP);
        assert_non_null(err);
        assert_non_null(strstr(err, p));
        assert_non_null(strstr(err, "is a symbolic link"));
        assert_non_null(strstr(err, "realpath"));
        free(err);

        /* A symbolic link on the way. */
        snprintf(p, sizeof(p), "%s/link/file", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_ONLY, &err), -ELOOP);
        assert_non_null(err);
        assert_non_null(strstr(err, "symbolic link"));
        free(err);

        snprintf(p, sizeof(p), "%s/missing", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_ONLY, &err), -ENOENT);
        assert_non_null(err);
        assert_non_null(strstr(err, "no such file"));
        free(err);

        assert_int_equal(landlock_rules_add(r, "tmp/relative", LANDLOCK_GRANT_READ_ONLY, &err), -EINVAL);
        assert_non_null(strstr(err, "absolute"));
        free(err);
        snprintf(p, sizeof(p), "%s/rw/../out", d);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_ONLY, &err), -EINVAL);
        free(err);
        snprintf(p, sizeof(p), "%s/rw", d);
        assert_int_equal(landlock_rules_add(r, p, (LandlockGrant) 7, &err), -EINVAL);
        free(err);
        assert_int_equal(landlock_rules_add(r, p, LANDLOCK_GRANT_READ_ONLY, NULL), 0);

        /* Nothing refused was kept. */
        assert_int_equal(landlock_rules_count(r), 1);

        LandlockRules *bad = NULL;
        assert_int_equal(landlock_rules_new(1u << 9, &bad), -EINVAL);
        assert_null(bad);
        remove_tree(d);
}

static void test_abi_hook(void **state) {
        (void) state;
        int abi = real_abi();
        if (abi >= 1) {
                long raw = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U);
                assert_int_equal(abi, raw);
        } else
                assert_true(abi == -ENOSYS || abi == -EOPNOTSUPP);

        assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, "0", 1), 0);
        assert_int_equal(landlock_abi(), 0);
        /* The hook only lowers what the kernel has. */
        assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, "1000", 1), 0);
        assert_int_equal(landlock_abi(), abi);
        if (abi >= 2) {
                assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, "1", 1), 0);
                assert_int_equal(landlock_abi(), 1);
        }
        const char *bad[] = { "", "x", "-1", "1x", " 1", "99999999999999999999" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, bad[i], 1), 0);
                assert_int_equal(landlock_abi(), -EINVAL);
        }
        assert_int_equal(unsetenv(LANDLOCK_TEST_ABI_ENV), 0);
}

/* After a refused landlock_apply the child must still be unrestricted
 * (nothing half-applied): it can read outside every rule. */
static void attempt_out_read(const Case *c, int phase, Report *rep) {
        (void) phase;
        rep->results[0] = try_open(c->dir, "out/file", O_RDONLY);
        rep->n = 1;
}

static void run_refused(const char *dir, const LandlockRules *r, int min_abi, const char *hook, const char *want) {
        if (hook)
                assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, hook, 1), 0);
        Case c = { .rules = r, .min_abi = min_abi, .attempt = attempt_out_read, .dir = dir };
        Report before, after;
        run_case(&c, &before, &after);
        assert_int_equal(unsetenv(LANDLOCK_TEST_ABI_ENV), 0);
        assert_int_equal(after.apply, -EOPNOTSUPP);
        print_message("refused: %s\n", after.why);
        assert_non_null(strstr(after.why, want));
        assert_true(strstr(after.why, "upgrade the kernel") || strstr(after.why, "enable it"));
        /* Refused before anything was applied. */
        assert_int_equal(before.results[0], 0);
        assert_int_equal(after.results[0], 0);
}

static void test_fails_closed(void **state) {
        (void) state;
        char *d = make_tree();
        _cleanup_(landlock_rules_freep) LandlockRules *r = rules_for(d, 0);
        _cleanup_(landlock_rules_freep) LandlockRules *tcp = rules_for(d, LANDLOCK_DENY_TCP);

        /* No Landlock at all. */
        assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, "0", 1), 0);
        assert_int_equal(landlock_abi(), 0);
        run_refused(d, r, 0, "0", "Landlock is not available");
        run_refused(d, r, 1, "0", "lsm=");

        int abi = real_abi();
        if (abi >= 1) {
                /* Older kernels than a caller needs, named by feature. */
                run_refused(d, tcp, 0, "3", "TCP bind and connect");
                run_refused(d, r, 6, "5", "scope abstract unix sockets and signals");
                run_refused(d, r, 3, "2", "truncation");
        }
        if (abi >= 1 && abi < LANDLOCK_ABI_KNOWN)
                run_refused(d, r, abi + 1, NULL, "Landlock ABI");

        const char *why = NULL;
        assert_int_equal(landlock_apply(r, LANDLOCK_ABI_KNOWN + 1, &why), -EINVAL);
        assert_non_null(why);
        assert_int_equal(landlock_apply(r, -1, NULL), -EINVAL);
        remove_tree(d);
}

/* An older ABI simulated through the hook still restricts what it knows. */
static void test_lower_abi_still_restricts(void **state) {
        (void) state;
        SKIP_UNLESS_ABI(2);
        char *d = make_tree();
        _cleanup_(landlock_rules_freep) LandlockRules *r = rules_for(d, 0);
        assert_int_equal(setenv(LANDLOCK_TEST_ABI_ENV, "1", 1), 0);
        Case c = { .rules = r, .attempt = attempt_fs, .dir = d };
        Report before, after;
        run_case(&c, &before, &after);
        assert_int_equal(unsetenv(LANDLOCK_TEST_ABI_ENV), 0);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[FS_RW_CREATE], 0);
        assert_int_equal(after.results[FS_RO_READ], 0);
        assert_int_equal(after.results[FS_RO_WRITE], -EACCES);
        assert_int_equal(after.results[FS_OUT_READ], -EACCES);
        /* ABI 1 does not know truncate: it stays allowed. */
        assert_int_equal(after.results[FS_RO_TRUNCATE], 0);
        remove_tree(d);
}

static int abstract_listener(const char *name) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(name);
        memcpy(sa.sun_path + 1, name, len);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(
                bind(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + len)), 0);
        assert_int_equal(listen(fd, 8), 0);
        return fd;
}

static int abstract_connect(const char *name) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(name);
        memcpy(sa.sun_path + 1, name, len);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = errno_of(
                connect(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + len)));
        close(fd);
        return r;
}

enum {
        SC_UNIX_OUTSIDE,
        SC_UNIX_INSIDE,
        SC_KILL_PARENT,
        SC_KILL_OWN_CHILD,
        _SC_MAX,
};

static void attempt_scoped(const Case *c, int phase, Report *rep) {
        rep->results[SC_UNIX_OUTSIDE] = abstract_connect(c->abstract_name);

        /* A listener created inside the sandbox is reachable from it. */
        char name[108];
        snprintf(name, sizeof(name), "%s-inside-%d", c->abstract_name, phase);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        memcpy(sa.sun_path + 1, name, strlen(name));
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        socklen_t sl = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
        if (l >= 0 && bind(l, (struct sockaddr *) &sa, sl) == 0 && listen(l, 1) == 0)
                rep->results[SC_UNIX_INSIDE] = abstract_connect(name);
        else
                rep->results[SC_UNIX_INSIDE] = -errno;
        if (l >= 0)
                close(l);

        /* Signal 0 checks permission without delivering anything. */
        rep->results[SC_KILL_PARENT] = errno_of(kill(getppid(), 0));
        pid_t k = fork();
        if (k == 0) {
                pause();
                _exit(0);
        }
        rep->results[SC_KILL_OWN_CHILD] = k < 0 ? -errno : errno_of(kill(k, SIGKILL));
        if (k > 0)
                (void) waitpid(k, NULL, 0);
        rep->n = _SC_MAX;
}

static void test_scoping(void **state) {
        (void) state;
        SKIP_UNLESS_ABI(6);
        char name[64];
        snprintf(name, sizeof(name), "lazaret-test-landlock-%d", (int) getpid());
        _cleanup_close_ int l = abstract_listener(name);
        assert_true(l >= 0);
        char *d = make_tree();
        _cleanup_(landlock_rules_freep) LandlockRules *r = rules_for(d, 0);
        Case c = { .rules = r, .min_abi = 6, .attempt = attempt_scoped, .dir = d, .abstract_name = name };
        Report before, after;
        run_case(&c, &before, &after);
        for (int i = 0; i < _SC_MAX; i++)
                assert_int_equal(before.results[i], 0);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[SC_UNIX_OUTSIDE], -EPERM);
        assert_int_equal(after.results[SC_UNIX_INSIDE], 0);
        assert_int_equal(after.results[SC_KILL_PARENT], -EPERM);
        assert_int_equal(after.results[SC_KILL_OWN_CHILD], 0);
        remove_tree(d);
}

static int tcp_connect(uint16_t port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = errno_of(connect(fd, (struct sockaddr *) &sa, sizeof(sa)));
        close(fd);
        return r;
}

static int tcp_bind_loopback(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = errno_of(bind(fd, (struct sockaddr *) &sa, sizeof(sa)));
        close(fd);
        return r;
}

static int udp_socket(void) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static void attempt_tcp(const Case *c, int phase, Report *rep) {
        (void) phase;
        rep->results[0] = tcp_connect(c->tcp_port);
        rep->results[1] = tcp_bind_loopback();
        rep->results[2] = udp_socket();
        rep->n = 3;
}

static void test_tcp(void **state) {
        (void) state;
        SKIP_UNLESS_ABI(4);
        _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(l >= 0);
        struct sockaddr_in sa = { .sin_family = AF_INET };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(l, 16), 0);
        socklen_t sl = sizeof(sa);
        assert_int_equal(getsockname(l, (struct sockaddr *) &sa, &sl), 0);

        char *d = make_tree();
        Report before, after;

        /* Network handling on: TCP connect and bind are denied. */
        _cleanup_(landlock_rules_freep) LandlockRules *deny = rules_for(d, LANDLOCK_DENY_TCP);
        Case c = { .rules = deny, .attempt = attempt_tcp, .dir = d, .tcp_port = ntohs(sa.sin_port) };
        run_case(&c, &before, &after);
        assert_int_equal(before.results[0], 0);
        assert_int_equal(before.results[1], 0);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[0], -EACCES);
        assert_int_equal(after.results[1], -EACCES);
        assert_int_equal(after.results[2], 0);

        /* Off: the same connect goes through under Landlock. */
        _cleanup_(landlock_rules_freep) LandlockRules *allow = rules_for(d, 0);
        c.rules = allow;
        run_case(&c, &before, &after);
        assert_int_equal(after.apply, 0);
        assert_int_equal(after.results[0], 0);
        assert_int_equal(after.results[1], 0);
        remove_tree(d);
}

/* A failed assertion leaves a test early: never let the hook leak into the
 * next one. */
static int unset_hook(void **state) {
        (void) state;
        return unsetenv(LANDLOCK_TEST_ABI_ENV);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_abi_hook, unset_hook),
                cmocka_unit_test_teardown(test_refused_paths, unset_hook),
                cmocka_unit_test_teardown(test_fails_closed, unset_hook),
                cmocka_unit_test_teardown(test_files, unset_hook),
                cmocka_unit_test_teardown(test_single_file_rule, unset_hook),
                cmocka_unit_test_teardown(test_lower_abi_still_restricts, unset_hook),
                cmocka_unit_test_teardown(test_scoping, unset_hook),
                cmocka_unit_test_teardown(test_tcp, unset_hook),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
