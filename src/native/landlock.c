/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "landlock.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"

/* Debian 12's linux-libc-dev (6.1) knows Landlock up to ABI 2. The values
 * below are the kernel's, from include/uapi/linux/landlock.h of Linux 6.15
 * (ABI 7); they never change once released. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2, Linux 5.19 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3, Linux 6.2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5, Linux 6.10 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4, Linux 6.7 */
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1) /* ABI 4, Linux 6.7 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6, Linux 6.12 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6, Linux 6.12 */
#endif
/* ABI 7 (Linux 6.15) only adds landlock_restrict_self flags that control
 * audit logging of denials; there is no new right to handle. */

/* struct landlock_ruleset_attr as of ABI 6. The header's copy may be older
 * (one field on Debian 12), so this one is ours; the kernel takes the size
 * and reads only what it is given. */
typedef struct LandlockRulesetAttr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net; /* ABI 4 */
        uint64_t scoped; /* ABI 6 */
} LandlockRulesetAttr;

#define ACCESS_FS_READ_ONLY (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The rights the kernel accepts in a rule on something that is not a
 * directory; any other right there is EINVAL. */
#define ACCESS_FS_FILE                                                                                                 \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |                   \
         LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

typedef struct LandlockRule {
        int fd; /* O_PATH */
        LandlockGrant grant;
        bool is_dir;
} LandlockRule;

struct LandlockRules {
        unsigned flags;
        LandlockRule *rules;
        size_t n, cap;
};

/* Every file-system right that ABI abi knows. */
static uint64_t access_fs_for_abi(int abi) {
        uint64_t a = 0;
        if (abi >= 1)
                a |= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                     LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                     LANDLOCK_ACCESS_FS_MAKE_SYM;
        if (abi >= 2)
                a |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                a |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                a |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return a;
}

/* What is missing when the kernel's ABI is below abi: the feature that ABI
 * introduced, and the way out. Static text for landlock_apply's ret_why. */
static const char *const missing_feature[LANDLOCK_ABI_KNOWN + 1] = {
        [0] = "Landlock is not available: the kernel lacks it or did not enable it at boot (Linux 5.13 or newer "
              "with \"landlock\" in the lsm= kernel parameter is needed); enable it, or use the container backend",
        [1] = "Landlock is not available: the kernel lacks it or did not enable it at boot (Linux 5.13 or newer "
              "with \"landlock\" in the lsm= kernel parameter is needed); enable it, or use the container backend",
        [2] = "the kernel's Landlock cannot restrict renames and links across directories (refer, Landlock ABI 2, "
              "Linux 5.19); upgrade the kernel, or use the container backend",
        [3] = "the kernel's Landlock cannot restrict truncation (Landlock ABI 3, Linux 6.2); upgrade the kernel, or "
              "use the container backend",
        [4] = "the kernel's Landlock cannot restrict TCP bind and connect (Landlock ABI 4, Linux 6.7); upgrade the "
              "kernel, or use the container backend",
        [5] = "the kernel's Landlock cannot restrict device ioctls (Landlock ABI 5, Linux 6.10); upgrade the kernel, "
              "or use the container backend",
        [6] = "the kernel's Landlock cannot scope abstract unix sockets and signals to the sandbox (Landlock ABI 6, "
              "Linux 6.12); upgrade the kernel, or use the container backend",
        [7] = "the kernel's Landlock cannot control the audit logging of denials (Landlock ABI 7, Linux 6.15); "
              "upgrade the kernel, or use the container backend",
};

static int parse_test_abi(const char *s, int *ret) {
        char *end = NULL;
        long v;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX)
                return -EINVAL;
        *ret = (int) v;
        return 0;
}

int landlock_abi(void) {
        const char *e = getenv(LANDLOCK_TEST_ABI_ENV);
        int want = INT_MAX;
        long abi;

        if (e) {
                int r = parse_test_abi(e, &want);
                if (r < 0)
                        return log_debug_errno(r, "%s=%s is not a decimal integer >= 0", LANDLOCK_TEST_ABI_ENV, e);
                if (want == 0)
                        return 0;
        }

        abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi < 0)
                return negative_errno();
        if (abi == 0) /* Not a version the kernel ever reports; never let it read as "none". */
                return -EIO;
        return (int) MIN(abi, (long) want);
}

int landlock_rules_new(unsigned flags, LandlockRules **ret) {
        LandlockRules *r;

        if (flags & ~(unsigned) _LANDLOCK_FLAGS_ALL)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->flags = flags;
        *ret = r;
        return 0;
}

LandlockRules *landlock_rules_free(LandlockRules *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++)
                safe_close(r->rules[i].fd);
        free(r->rules);
        return mfree(r);
}

size_t landlock_rules_count(const LandlockRules *r) {
        return r ? r->n : 0;
}

/* Describe a refused rule in *ret_error (if asked for) and return r. */
_printf_(3, 4) static int rule_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        int k;

        if (!ret_error)
                return r;
        va_start(ap, fmt);
        k = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (k < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return r;
}

int landlock_rules_add(LandlockRules *r, const char *path, LandlockGrant grant, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (ret_error)
                *ret_error = NULL;
        if (!r || !path)
                return -EINVAL;
        if (grant < 0 || grant >= _LANDLOCK_GRANT_MAX)
                return rule_error(ret_error, -EINVAL, "Landlock rule for '%s': unknown access grant (a bug)", path);
        if (!path_is_absolute(path) || path_has_dotdot(path))
                return rule_error(ret_error, -EINVAL,
                                  "Landlock rule for '%s': not an absolute path without \"..\"; resolve it first "
                                  "(realpath)",
                                  path);

        /* RESOLVE_NO_SYMLINKS refuses a link in any directory component
         * (ELOOP); with O_PATH|O_NOFOLLOW a link as the last component is
         * opened itself, which fstat then tells apart. */
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        fd = (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
        if (fd < 0) {
                int e = negative_errno();
                switch (e) {
                case -ELOOP:
                        return rule_error(ret_error, e,
                                          "Landlock rule for '%s': a directory on the way is a symbolic link; rules "
                                          "take resolved paths, give the real path (realpath) instead",
                                          path);
                case -ENOENT:
                        return rule_error(ret_error, e,
                                          "Landlock rule for '%s': no such file or directory; create it or drop "
                                          "the rule",
                                          path);
                default:
                        return rule_error(ret_error, e, "Landlock rule for '%s': cannot open it: %s", path,
                                          strerror(-e));
                }
        }
        if (fstat(fd, &st) < 0)
                return rule_error(ret_error, negative_errno(), "Landlock rule for '%s': cannot stat it", path);
        if (S_ISLNK(st.st_mode))
                return rule_error(ret_error, -ELOOP,
                                  "Landlock rule for '%s': it is a symbolic link; rules take resolved paths, give "
                                  "the link's target (realpath) instead",
                                  path);

        if (r->n == r->cap) {
                size_t cap = MAX(r->cap * 2, (size_t) 8);
                LandlockRule *n = reallocarray(r->rules, cap, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                r->rules = n;
                r->cap = cap;
        }
        r->rules[r->n++] = (LandlockRule){
                .fd = TAKE_FD(fd),
                .grant = grant,
                .is_dir = S_ISDIR(st.st_mode),
        };
        return 0;
}

static uint64_t rule_access(const LandlockRule *rule, uint64_t handled_fs) {
        uint64_t a = 0;

        switch (rule->grant) {
        case LANDLOCK_GRANT_READ_ONLY:
                a = ACCESS_FS_READ_ONLY;
                break;
        case LANDLOCK_GRANT_READ_WRITE:
                a = handled_fs;
                break;
        case LANDLOCK_GRANT_NAMES_READ_ONLY:
                a = LANDLOCK_ACCESS_FS_READ_DIR;
                break;
        case LANDLOCK_GRANT_NAMES_READ_WRITE:
                a = handled_fs & ~ACCESS_FS_FILE;
                break;
        case _LANDLOCK_GRANT_MAX:
        case _LANDLOCK_GRANT_INVALID:
                break;
        }
        if (!rule->is_dir)
                a &= ACCESS_FS_FILE;
        return a & handled_fs;
}

int landlock_apply(const LandlockRules *r, int min_abi, const char **ret_why) {
        const char *dummy;
        _cleanup_close_ int ruleset = -EBADF;
        LandlockRulesetAttr attr = { 0 };
        size_t attr_size;
        int abi, need;

        if (!ret_why)
                ret_why = &dummy;
        *ret_why = NULL;
        if (!r || min_abi < 0 || min_abi > LANDLOCK_ABI_KNOWN) {
                *ret_why = "invalid Landlock request (a bug)";
                return -EINVAL;
        }

        abi = landlock_abi();
        if (abi == -ENOSYS || abi == -EOPNOTSUPP || abi == 0) {
                *ret_why = missing_feature[0];
                return -EOPNOTSUPP;
        }
        if (abi < 0) {
                *ret_why = "probing the kernel's Landlock ABI failed";
                return abi;
        }
        abi = MIN(abi, LANDLOCK_ABI_KNOWN);

        /* Fail closed, naming what the caller asked for first. */
        if ((r->flags & LANDLOCK_DENY_TCP) && abi < 4) {
                *ret_why = missing_feature[4];
                return -EOPNOTSUPP;
        }
        need = MAX(min_abi, 1);
        if (abi < need) {
                *ret_why = missing_feature[need];
                return -EOPNOTSUPP;
        }

        attr.handled_access_fs = access_fs_for_abi(abi);
        attr_size = offsetof(LandlockRulesetAttr, handled_access_net);
        if (abi >= 4) {
                if (r->flags & LANDLOCK_DENY_TCP)
                        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
                attr_size = offsetof(LandlockRulesetAttr, scoped);
        }
        if (abi >= 6) {
                attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
                attr_size = sizeof(attr);
        }

        ruleset = (int) syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
        if (ruleset < 0) {
                *ret_why = "creating the Landlock ruleset failed";
                return negative_errno();
        }
        for (size_t i = 0; i < r->n; i++) {
                struct landlock_path_beneath_attr pb = {
                        .allowed_access = rule_access(&r->rules[i], attr.handled_access_fs),
                        .parent_fd = r->rules[i].fd,
                };
                if (pb.allowed_access == 0)
                        continue;
                if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
                        *ret_why = "adding a Landlock rule failed";
                        return negative_errno();
                }
        }

        /* Unprivileged landlock_restrict_self needs no_new_privs; it also
         * keeps a set-id program from running with the sandbox's rights. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                *ret_why = "setting no_new_privs failed";
                return negative_errno();
        }
        if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) {
                *ret_why = "enforcing the Landlock ruleset failed";
                return negative_errno();
        }
        return 0;
}
