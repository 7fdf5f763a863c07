/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* The children of thread tid of process pid (/proc/PID/task/TID/children:
 * the processes that thread forked), in *ret (caller frees) and *ret_n. */
int proc_children(pid_t pid, pid_t tid, pid_t **ret, size_t *ret_n);
