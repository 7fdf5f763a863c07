/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's memory as the host pays it (issue 16), without cgroups:
 * gVisor keeps every page its programs hold in one memory file, a memfd of
 * the runsc-sandbox process; the blocks it has allocated are their memory.
 * The coordinator holds that file open and looks at it once a second. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Open the memory file of the sandbox whose conmon is conmon_pid: its
 * runsc-sandbox child's "memfd:runsc-memory". -ESRCH when there is none
 * (not runsc, or it ended), -EACCES when /proc does not let us. */
int limits_memory_open(pid_t conmon_pid, int *ret_fd);

/* The bytes the memory file holds now. */
int limits_memory_used(int fd, uint64_t *ret_bytes);

/* The CPU ceiling: every host thread of the sandbox (runsc's processes
 * under conmon_pid and their descendants, systrap's stubs included) gets
 * the last n_cpus CPUs this process may use (0: all of them) and the nice
 * value nice; threads made later inherit both. Rootless this needs no
 * privilege: they are the user's own. Returns how many threads it set, or
 * -errno; *ret_cpus says which CPUs ("0-1"). with_root: conmon_pid's own
 * threads as well (the native backend's joiner, whose command it starts
 * next). */
int limits_cpu_apply(pid_t conmon_pid, bool with_root, unsigned n_cpus, int nice, char *ret_cpus, size_t size);
