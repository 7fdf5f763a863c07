/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"

#include "log.h"
#include "macro.h"
#include "seccomp-filter.h"

/* Fail with EPERM whatever the arguments. */
static const int denied_syscalls[] = {
        /* Mounts, old and new API: a mount can hide or replace what Landlock
         * rules name, and each is kernel attack surface. */
        SCMP_SYS(mount),
        SCMP_SYS(umount2),
        SCMP_SYS(pivot_root),
        SCMP_SYS(move_mount),
        SCMP_SYS(open_tree),
        SCMP_SYS(fsopen),
        SCMP_SYS(fsconfig),
        SCMP_SYS(fsmount),
        SCMP_SYS(fspick),
        SCMP_SYS(mount_setattr),
        /* Namespaces: a new user namespace brings capabilities over new
         * mount and network namespaces. Namespace flags of clone are below. */
        SCMP_SYS(unshare),
        SCMP_SYS(setns),
        /* Other processes' memory and descriptors (the launcher's among them). */
        SCMP_SYS(ptrace),
        SCMP_SYS(process_vm_readv),
        SCMP_SYS(process_vm_writev),
        SCMP_SYS(pidfd_getfd),
        SCMP_SYS(kcmp),
        /* io_uring performs its operations without the system calls this
         * filter sees (socket among them). */
        SCMP_SYS(io_uring_setup),
        SCMP_SYS(io_uring_enter),
        SCMP_SYS(io_uring_register),
        /* Kernel attack surface an agent has no use for. */
        SCMP_SYS(userfaultfd),
        SCMP_SYS(bpf),
        SCMP_SYS(perf_event_open),
        SCMP_SYS(add_key),
        SCMP_SYS(request_key),
        SCMP_SYS(keyctl),
        SCMP_SYS(kexec_load),
        SCMP_SYS(kexec_file_load),
        SCMP_SYS(init_module),
        SCMP_SYS(finit_module),
        SCMP_SYS(delete_module),
};

/* clone flags that create a namespace. CLONE_NEWTIME (0x80) is not among
 * them: for clone it is a bit of the exit signal (CSIGNAL), and only unshare
 * and clone3, both refused whole, can ask for a time namespace. */
static const uint64_t clone_new_flags[] = {
        CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

/* Push input into a terminal's queue (typed as if by the user outside the
 * sandbox), and the Linux console's selection and paste. */
static const uint64_t denied_ioctls[] = { TIOCSTI, TIOCLINUX };

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static int build(unsigned flags, scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (flags & ~(unsigned) _NATIVE_SECCOMP_FLAGS_ALL)
                return -EINVAL;

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        /* Calls under an ABI the filter does not describe (x32, or 32-bit
         * x86 on a non-x86 host) would bypass it: kill instead. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return log_debug_errno(r, "seccomp: cannot set the action for other ABIs: %s", strerror(-r));
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
        if (r < 0)
                return log_debug_errno(r, "seccomp: cannot ask for no_new_privs: %s", strerror(-r));
#if defined(__x86_64__)
        /* 32-bit programs run on x86-64 and call through int 0x80 with their
         * own numbers; libseccomp translates every rule for them. */
        r = seccomp_arch_add(ctx, SCMP_ARCH_X86);
        if (r < 0 && r != -EEXIST)
                return log_debug_errno(r, "seccomp: cannot add the x86 32-bit ABI: %s", strerror(-r));
#endif

        for (size_t i = 0; i < ELEMENTSOF(denied_syscalls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied_syscalls[i], 0);
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot deny system call %d: %s", denied_syscalls[i],
                                               strerror(-r));
        }

        /* One rule per flag: a comparison can only test that masked bits
         * equal a value, not that any of them is set. */
        for (size_t i = 0; i < ELEMENTSOF(clone_new_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, clone_new_flags[i], clone_new_flags[i]));
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot deny namespace flags of clone: %s", strerror(-r));
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return log_debug_errno(r, "seccomp: cannot deny clone3: %s", strerror(-r));

        /* The kernel takes an ioctl's request as a 32-bit int, so the upper
         * half of the register must not matter: TIOCSTI | 1 << 32 is TIOCSTI. */
        for (size_t i = 0; i < ELEMENTSOF(denied_ioctls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, UINT32_MAX, denied_ioctls[i]));
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot deny ioctl %#llx: %s",
                                               (unsigned long long) denied_ioctls[i], strerror(-r));
        }

        if (flags & NATIVE_SECCOMP_NO_NET) {
                /* A family with bits above the int the kernel reads is refused
                 * too (it is not AF_UNIX as a 64-bit value): fail closed. */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot limit socket to AF_UNIX: %s", strerror(-r));
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                                     SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot limit socketpair to AF_UNIX: %s", strerror(-r));
        }

        if (flags & NATIVE_SECCOMP_NO_SOCKET) {
                static const int calls[] = { SCMP_SYS(socket), SCMP_SYS(mknod), SCMP_SYS(mknodat) };
                for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), calls[i], 0);
                        if (r < 0)
                                return log_debug_errno(r, "seccomp: cannot deny system call %d: %s", calls[i],
                                                       strerror(-r));
                }
        }
        *ret = TAKE_PTR(ctx);
        return 0;
}

int native_seccomp_apply(unsigned flags) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r = build(flags, &ctx);
        if (r < 0)
                return r;
        r = seccomp_load(ctx);
        if (r < 0)
                return log_debug_errno(r, "seccomp: loading the filter failed: %s", strerror(-r));
        return 0;
}

int native_seccomp_export(unsigned flags, struct sock_fprog *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r = build(flags, &ctx);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = memfd_create("seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % sizeof(struct sock_filter) != 0 || size / sizeof(struct sock_filter) > USHRT_MAX)
                return -EINVAL;
        struct sock_filter *f = malloc((size_t) size);
        if (!f)
                return -ENOMEM;
        if (pread(fd, f, (size_t) size, 0) != size) {
                free(f);
                return -EIO;
        }
        *ret = (struct sock_fprog){ .len = (unsigned short) (size / sizeof(struct sock_filter)), .filter = f };
        return 0;
}

void native_seccomp_prog_done(struct sock_fprog *p) {
        free(p->filter);
        *p = (struct sock_fprog){};
}

int native_seccomp_load(const struct sock_fprog *p) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, p) < 0)
                return -errno;
        return 0;
}
