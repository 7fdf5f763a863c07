/* SPDX-License-Identifier: MIT */
#pragma once

/* The native backend's seccomp filter (issue 21): installed right before the
 * agent is executed, it makes the system calls that reach kernel attack
 * surface or escape the sandbox (mounts, namespaces, tracing and reading
 * other processes, io_uring, userfaultfd, BPF, perf, keyrings, kexec,
 * modules, terminal input injection) fail with EPERM, and leaves the rest to
 * Landlock and the ordinary permission checks (the default is to allow).
 * clone3 fails with ENOSYS, as on a kernel without it, because its flags are
 * in memory a filter cannot read; libc then falls back to clone, whose
 * namespace flags the filter sees.
 *
 * On x86-64 the filter also covers the 32-bit x86 system calls (int 0x80);
 * a call under any other ABI (x32 among them) kills the process. */

#include <linux/filter.h>

#include "macro.h"

typedef enum NativeSeccompFlags {
        /* FS-ONLY mode: socket() and socketpair() with a family other than
         * AF_UNIX fail with EAFNOSUPPORT. A 32-bit caller using the old
         * socketcall() multiplexer cannot have its family inspected, so its
         * socket and socketpair calls fail whatever the family. */
        NATIVE_SECCOMP_NO_NET = 1u << 0,
        /* An auto-approved escalation's command (issue 41): no socket at
         * all (socket(2) fails with EPERM: no network, no Unix socket of
         * the host's such as the D-Bus session bus), and no mknod(2) (no
         * device node, where the command runs as root). socketpair(2)
         * stays: its two ends reach nothing. */
        NATIVE_SECCOMP_NO_SOCKET = 1u << 1,
        _NATIVE_SECCOMP_FLAGS_ALL = NATIVE_SECCOMP_NO_NET | NATIVE_SECCOMP_NO_SOCKET,
} NativeSeccompFlags;

/* Build the filter for flags (NativeSeccompFlags) and load it into the
 * calling thread, setting no_new_privs first (needed without CAP_SYS_ADMIN).
 * It cannot be removed, and is inherited by children and across execve.
 * Allocates (libseccomp), so call it in a single-threaded child or one
 * whose parent was single-threaded. Returns 0; -EINVAL for unknown flags;
 * -ENOMEM; or the -errno of building or loading the filter (-EINVAL from
 * the kernel most often means it lacks seccomp filtering), in which case
 * nothing was loaded and the agent must not be executed. */
int native_seccomp_apply(unsigned flags);

struct sock_fprog;

/* The same filter as a BPF program to load later, in a child that may not
 * allocate (a spawn() before_exec): *ret->filter is allocated, freed by
 * native_seccomp_prog_done. Returns 0 or -errno as above. */
int native_seccomp_export(unsigned flags, struct sock_fprog *ret);
void native_seccomp_prog_done(struct sock_fprog *p);

/* Set no_new_privs and load p into the calling thread: system calls only.
 * Returns 0 or -errno. */
int native_seccomp_load(const struct sock_fprog *p);
